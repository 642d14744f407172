"""General nouns and verbs any API's callers use: people and their accounts (users, members,
invitations, profiles, e-mail, two-factor), organisations, blocking, assigning, visibility, drafts,
templates, logs, caches, certificates, deployments, keys, registrations, rate limits, dependencies,
duplicates -- each a paraphrase, an inflection or an abbreviation that holds whatever the API
("people" → user, member; "deploying" → deployment; "versus" → compare). What only one API's
world makes true ("ticket" → issue, "project" → repository) is that API's pack's.

Entries of the core vocabulary map (:mod:`gateway.discovery.vocabulary`); see its rules there.
"""

from __future__ import annotations

from gateway.discovery.vocabulary.table import add

# from the GitHub map, people: true of any API
add("person,people,someone,employee,employees,colleague,coworker", "user,member")
add("inbox,unread,notifications", "notification")
add("who is in,members,membership,belongs to", "member")
add("ban,blacklist,blocklist,block", "block")
add("unban,unblock", "unblock")
add("troll,trolls,spammer,spammers,abuser,bad actor", "user")
add("invites,invitation,invitations,invited,pending invite", "invitation,invite")
add("invite", "invitation,invite + create")  # the verb; "invites", "invited" name invitations
add("onboard", "add,invitation,member")
add("offboard", "remove,member")
add("2fa,two factor,mfa", "two factor,2fa")
add("email,emails,e mail", "email")
add("profile,bio,avatar,public profile", "user,profile")
add("unassign,deassign", "assignee + remove")
add("everyone,everybody,all members,whole team", "member,user")
add("engineer,engineers,developer,developers,devs,teammate,teammates,hire,hires,new hire,new hires,"
    "intern,interns,newcomer,newcomers,joiner,joiners", "user,member")
# from the GitHub map, verbs: true of any API
add("assign,give to,hand to", "assignee,assign")
# from the GitHub map, code: true of any API
add("org,orgs,organization,organizations,company,organisation", "organization,org")
add("languages,language,written in", "language")
add("draft,wip,work in progress", "draft")
add("public,private,visibility,internal,hidden", "visibility")
add("template,templates,boilerplate", "template")
add("compared to,compared with,versus,vs", "compare,diff")
# from the GitHub map, security: true of any API
add("throttled,throttle,quota,api calls", "rate limit")
add("revoke,withdraw,rescind", "revoke,remove,delete")
add("key,keys", "key")
add("dependency,dependencies,deps,libraries,library", "dependency,dependencies")
add("register,enroll,enrol", "registration,register + create,add")  # "register my ssh key"
add("registration", "registration,register")
# from the GitHub map, ci: true of any API
add("deploy,deployed,deploys,deploying,rollout", "deployment")
add("logs,log,output", "log,logs")
add("cache,caches,cached", "cache")
add("https,tls,ssl,certificate,cert,certs", "https,certificate")
add("kept,retention,retain,retained,keep around", "retention")
# from the GitHub map, tickets: true of any API
add("pin,pinned", "pin")
add("dupe,duplicate,duplicates", "duplicate")
# Abbreviations and jargon any API's callers type (person wording): a text message is a message,
# an "ack" an acknowledgement, a chargeback a dispute, money "paid out" a payout; "rn", "asap"
# say when, not what.
add("sms,text message,text messages", "message,sms")
add("ack,acks,acked,acking", "acknowledge")
add("chargeback,chargebacks", "dispute")
add("pay out,paid out", "payout")
add("creds", "credential,credentials")
add("rn,asap,right now,right away", "")
