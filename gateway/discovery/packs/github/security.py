"""Security and rules: alerts and advisories, scanning, keys, tokens, secrets and variables,
protections, rulesets and restrictions on who may do what.

Entries of the GitHub pack's map (:mod:`gateway.discovery.packs.github`); see its rules there.
"""

from __future__ import annotations

from gateway.discovery.packs.github.table import add

add("vulnerable,vulnerability,vulnerabilities,cve,cves,insecure", "dependabot alert,dependabot,advisory,vulnerability alert")
add("security hole,security holes,security issue,security bug,security flaw,exploit,exploits,zero day,0day",
    "vulnerability,advisory")
add("leaked,leak,password,passwords", "secret scanning,secret,credential")
add("static analysis,sast,lint,linter", "code scanning")
add("protect,protection,require reviews,guard", "protection")
add("only let,limit who,restrict,restrict who,lock down", "restriction,limit,interaction")
add("only allow,only permit,allow only,permit only", "policy,rule,restriction + create,set")
add("require,enforce,mandate,mandatory,required", "protection,required,rule")
add("rotate,regenerate,roll over,renew,cycle", "regenerate,create,update,set")
add("signing key,signing keys,gpg,pgp", "gpg key,gpg,ssh signing key")
add("env var,env vars,environment variable,environment variables,config var,config vars,variable,variables",
    "variable")
add("unprotect,unlock branch", "protection + delete")
add("disclose,privately report,report privately,responsible disclosure", "report,create")
add("sbom,bill of materials", "sbom")
add("token,tokens,credential,credentials,api key,api keys,access token,access tokens", "token,credential,secret")
add("cooldown,cool down,cooling off,cooling off period", "interaction,limit,restriction")
# "make sure nobody can force push": a rule on what may be done is a protection or a ruleset.
add("nobody can,no one can,nobody may,prevent,forbid,disallow,only admins can", "protection,rule,restriction")
add("force push,force pushes,force pushing,force pushed", "force push,protection")
# "nobody should be able to reply": a rule on who may comment is a locked conversation.
add("nobody should,no one should,stop anyone from,stop people from,prevent anyone from",
    "protection,rule,restriction,lock")
add("encrypt,encrypting,encryption,encrypted", "public key")  # secrets are sent sealed with one
add("shared with,share with", "selected,repositories")  # an org secret shared with repos
# round 6
add("signed commits,signed commit,commit signing,commit signature,commit signatures,verified commits,gpg signed,"
    "gpg signature,gpg signatures", "commit signature,signature")
add("sarif,scan results,scanning results,scanner results,scanner output,analysis results", "sarif,analysis,code scanning")
add("let only,allow just,let just", "restriction,limit,interaction + set")
# "main needs two approvals": how many approving reviews a protected branch requires
add("approvals,approving reviews,required approvals,required reviews,required reviewers,review count",
    "review protection,required approving review,required")
add("ssh key,ssh keys,ssh public key,ssh public keys", "public key,ssh key,key")  # GitHub's "public keys"
add("lockfile,lockfiles,lock file,lock files,manifest,manifests", "dependency,dependencies,manifest")
add("dependency changes,dependency diff,dependency review,changed dependencies,new dependencies,added dependencies",
    "dependency,diff,compare")
