"""How people ask → how API descriptions say it.

Callers say "PR", "ticket", "pipeline", "ship"; specs say "pull request", "issue", "workflow run",
"release". :func:`parse` turns a query into a :class:`Query`: its *concepts* (each the caller's
word or phrase plus the spec words that mean the same; the ranker scores a tool by the concepts it
matches), its soft hints and its intent (:mod:`.intent`); :func:`expand` is its concepts alone.

The map is a general DevOps/API vocabulary (source hosting, CI, tickets, deploys, people, verbs,
phrasal verbs), not a list of one spec's operation names. Keys and alternatives are lower-case word
sequences as :func:`gateway.discovery.words.split_words` yields them; alternatives are phrases; a
key is also found in an inflected form (tickets, deploying). A key added to the map must not come
from the measurement-only labelled sets (tests/discovery/test_recall.py checks it; see
docs/discovery.md, "How it is measured").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from gateway.discovery.arguments import HINTS, tokens
from gateway.discovery.intent import READ, WRITE, Intent, is_question, query_intent
from gateway.discovery.senses import senses
from gateway.discovery.words import split_words

__all__ = ["Concept", "Query", "parse", "expand", "STOPWORDS", "SYNONYMS", "SOFT", "VERBS"]

# Words that carry no intent in a request ("show me the ...", "what is ...").
STOPWORDS = frozenset("""
a an the me my mine i we our us you your it its this that these those is are was were be been being
am do does did to of for in on at by with from into onto about as and or but so than then there
here what which who whom whose how many much any some all every each please can could would should
will shall may might must just still yet now right currently lately recently really very also
has have had having let lets one ones up out them they their thing things get give show want need
retrieve obtain grab inspect describe display return fetch whole entire straight directly including
""".split()) | frozenset(("details detail metadata properties info information particulars specifics").split())

# Words asking about one item ("details of ticket 42", "info on the runner"): a soft hint for a
# singular get in a read; as words they rank nothing (every tool has details).
ONE_ITEM = frozenset("details detail metadata properties info information particulars specifics".split())

# Verbs are mapped to the CRUD words specs use; nouns to the spec's nouns. "get", "show", "give"
# are stop words above: every read operation says "get"/"list", so they rank nothing.
SYNONYMS: dict[tuple[str, ...], tuple[tuple[str, ...], ...]] = {}


def _add(keys: str, alts: str) -> None:
    """``_add("pr,prs", "pull request,pull")``: each key means any of the phrases. ``+`` joins
    concepts a key carries at once: ``_add("ship", "release + create")`` (ship = create a release)."""
    groups = tuple(tuple(a.strip() for a in g.split(",") if a.strip()) for g in alts.split("+") if g.strip())
    for key in keys.split(","):
        SYNONYMS[tuple(split_words(key))] = groups


# --- code review and source hosting
_add("pr,prs,mr,mrs,merge request,merge requests,patch,patches", "pull request,pull")
_add("land,ship it", "merge")
_add("repo,repos,repository,repositories,project,projects,codebase", "repository,repo")
_add("org,orgs,organization,organizations,company,organisation", "organization,org")
_add("diff,difference,differences,between,changed between,differ", "compare")
_add("grep", "search code,code")
_add("branch", "branch,ref")
_add("commit,sha,revision", "commit,ref")
_add("fork", "fork")
_add("sync", "merge upstream,sync")
_add("file,files", "file,content,contents")
_add("snippet,paste", "gist")
_add("star,bookmark", "star")
_add("readme", "readme")
# --- tickets
_add("ticket,tickets,bug,bugs,incident,incidents,task,tasks", "issue")
_add("tag,tag as,tag with,categorize,categorise", "label,tag,topic")
_add("sprint,sprints,deadline", "milestone")
_add("thumbs up,upvote,like,emoji,+1,heart,thumbs down,downvote,laugh,hooray,rocket,eyes", "reaction")
_add("react,react to", "reaction + create")
_add("note,message,messages", "comment")
_add("discussion,conversation,thread", "issue,comment,conversation,timeline")
# --- CI/CD
_add("pipeline,pipelines,ci,build,builds", "workflow run,workflow,actions,check")
_add("job", "job,workflow run")
_add("ship", "release + create")
_add("shipped,version,versions", "release")
_add("last,latest,newest,most recent,current", "latest")
_add("deploy,deployed,deploys,deploying,rollout", "deployment")
_add("green,passing,passed,failing,red,status", "status,check")
_add("logs,log,output", "log,logs")
_add("machine,machines,agent,agents,worker,workers", "runner")
_add("hosted ourselves,our own", "self hosted")
_add("artifact,artifacts,test results,test reports,coverage report,coverage reports", "artifact")
_add("binary,binaries,build output", "artifact,asset")
_add("nightly,cron,scheduled", "workflow")
_add("site,website,docs site", "pages")
_add("hook,hooks,callback,callbacks,notify", "webhook,hook")
# --- security
_add("vulnerable,vulnerability,vulnerabilities,cve,cves,insecure", "dependabot alert,dependabot,advisory,vulnerability alert")
_add("security hole,security holes,security issue,security bug,security flaw,exploit,exploits,zero day,0day",
     "vulnerability,advisory")
_add("leaked,leak,password,passwords", "secret scanning,secret,credential")
_add("static analysis,sast,lint,linter", "code scanning")
_add("throttled,throttle,quota,api calls", "rate limit")
_add("protect,protection,require reviews,guard", "protection")
# --- people
_add("person,people,someone,employee,employees,colleague,coworker", "user,member")
_add("access,permission,permissions,write access,push", "collaborator,permission")
_add("logged in,who am i,myself,my account,i am", "authenticated user,authenticated")
_add("inbox,unread,notifications", "notification")
_add("contributed,contributors,authors", "contributor")
_add("looked at,visit,visits,visited,visitors,traffic,views", "views,traffic")
_add("languages,language,written in", "language")
# --- verbs
_add("open,make,new,add,start,begin,file a,raise,set up,leave,post,write,share,record,plan", "create")
_add("kick off,trigger,run by hand,launch,fire", "dispatch,create")
_add("retry,rerun,re run,restart,redo", "re run,rerun,rerequest")
_add("stop,abort,kill,halt", "cancel")
_add("force,forcibly,hard,hung,stuck,frozen", "force")
_add("remove,drop,destroy,erase,kick,kick out,clean up", "delete,remove")
_add("close,reopen,edit,change,modify,archive", "update")
_add("fix,correct,amend,adjust,tweak,reword,revise,touch up", "update")
_add("set", "set,update")
_add("list,show all,which,enumerate,what are", "list")
_add("find,look for,search for,search", "search")
_add("look up", "get")
_add("who is in,members,membership,belongs to", "member")
_add("read,see,view,look at,download", "get,download")
_add("resend,redeliver,replay", "redeliver")
_add("move,hand over", "transfer")
_add("turn off,switch off,pause", "disable")
_add("turn on,switch on,resume", "enable")
_add("approve,sign off,lgtm,looks good,look good,good to go,good to merge", "approve,review")
_add("assign,give to,hand to", "assignee,assign")
_add("publish", "create,release,pages")
_add("take off,take away,take out,get rid of,throw away,throw out,discard,strip", "remove,delete,dismiss")
_add("mark,mark as", "mark,set,update,create")
_add("grant,give access,let,give", "add,create,grant")
_add("let people", "enable,unlock,add")
# --- phrases that ask nothing ("give me the logs" asks for logs, not for giving)
_add("give me,give us,show me,tell me,let me know,can you,could you", "")
# --- general nouns: how people name what APIs call events, comments, addresses, states
_add("history,happened,timeline,audit trail,what happened", "event,timeline,history,activity")
_add("say,said,wrote,feedback,remark,remarks", "comment,review")
_add("line by line,inline,line comments,on a line", "review comment,comment")
_add("ip,ips,ip range,ip ranges,ip address,ip addresses,allowlist", "ip address,meta")
_add("waiting,awaiting,outstanding,unmerged,not merged", "open,pending")
_add("licence,licenses,licences", "license")
_add("talk,discuss,chat", "conversation,comment")
_add("again,back", "un,re")
_add("off", "remove,delete")
_add("back on,turn back on", "enable")
_add("tear down,take down,shut down,decommission,dismantle,disband", "delete,remove")
_add("rename", "rename,update")
_add("image,images,container,containers,docker,npm,maven,nuget,rubygems", "package")
_add("only let,limit who,restrict,restrict who,lock down", "restriction,limit,interaction")
_add("only allow,only permit,allow only,permit only", "policy,rule,restriction + create,set")
_add("export,back up,backup,backups", "migration,export,archive")
_add("copy,make a copy", "fork")
_add("doing,been doing,up to", "event,activity")


# --- round 3: the jargon developers use for each area of a source-hosting / CI API
# general verbs of storing, clearing, requiring, converting
_add("store,save,stash,put,persist", "create,update,set")
_add("purge,wipe,flush,empty,prune,evict,invalidate", "delete,remove")
_add("nuke,zap,trash,scrap,ditch,axe", "delete,remove")
_add("bump", "release,tag + create")
_add("come from,comes from,coming from,came from", "referrer,referral,source")
_add("promote,demote,downgrade", "role,membership + set,update")
_add("clear", "delete,remove,mark,reset")
_add("pull request,pull requests", "pull request,pull")
_add("review request,review requests", "review request,requested reviewers")
_add("require,enforce,mandate,mandatory,required", "protection,required,rule")
_add("convert,turn into", "convert,update")
_add("request,ask for", "request,create")
# releases, tags, versions
_add("cut,spin up,provision,stand up", "create")
_add("yank,unpublish,pull down", "delete,remove")
_add("asset,assets,attachment,attachments,downloads,downloadable,tarball,zipball,installer", "asset")
_add("attach", "upload,asset")
_add("changelog,changelogs", "release notes,release")
_add("prerelease,pre release,beta,rc,release candidate", "prerelease,release")
_add("topic,topics,keyword,keywords", "topic")
# keys, tokens, secrets, variables
_add("rotate,regenerate,roll over,renew,cycle", "regenerate,create,update,set")
_add("revoke,withdraw,rescind", "revoke,remove,delete")
_add("key,keys", "key")
_add("signing key,signing keys,gpg,pgp", "gpg key,gpg,ssh signing key")
_add("env var,env vars,environment variable,environment variables,config var,config vars,variable,variables",
     "variable")
_add("prod,production,staging,stage,qa,env,envs,environments", "environment")
_add("deploy to,deploys to,deployment target,deployment targets", "environment,deployment")
_add("cd", "deployment")
# CI
_add("step,steps", "job,step")
_add("warning,warnings,warned,warn,errors,problems,findings", "annotation,alert,warning")
_add("flaky,flake", "re run,rerun")
_add("rebuild,redeploy,republish,re deploy", "build,re run,request")
_add("badge,badges", "workflow,status")
_add("cache,caches,cached", "cache")
# code review, commits, branches
_add("request changes,changes requested,reject,needs work", "review,submit review")
_add("squash,rebase,fast forward", "merge")
_add("blame,last changed,last modified,last touched,git log,commit history,commit log,git history",
     "commit,commits")
_add("hash,commit id,commit hash", "commit,sha,ref")
_add("tip,head,tip of", "ref,branch")
_add("default branch", "default branch")
_add("conflict,conflicts,mergeable,mergeability", "mergeable")
_add("unprotect,unlock branch", "protection + delete")
_add("pin,pinned", "pin")
_add("draft,wip,work in progress", "draft")
# repositories
_add("public,private,visibility,internal,hidden", "visibility")
_add("referrer,referrers,referring sites,referring site,referral,referrals,traffic sources,"
     "traffic source,send visitors,sends visitors,send traffic", "referrer,referral")
_add("clones,cloned,clone count", "clones,clone")
_add("popular,most viewed,top pages,top paths", "popular,top")
_add("autolink,autolinks,jira,tracker,issue tracker,external tracker,external references", "autolink,reference")
_add("template,templates,boilerplate", "template")
_add("watch,subscribe", "subscription,watch + set")
_add("watchers,subscribers,watcher,subscriber,watching", "watcher,subscriber")
_add("unwatch,unsubscribe,mute,ignore", "subscription + delete,ignored")
# people, teams, roles
_add("admin,admins,administrator,maintainer,maintainers,role,roles", "role,membership,admin")
_add("rights,privileges,privilege,push rights,push access,commit access,admin rights",
     "permission,collaborator")
_add("ban,blacklist,blocklist,block", "block")
_add("unban,unblock", "unblock")
_add("troll,trolls,spammer,spammers,abuser,bad actor", "user")
_add("contractor,contractors,outside,outsider,outsiders,external,guest,guests,non member,non members",
     "outside collaborator")
_add("invites,invitation,invitations,invited,pending invite", "invitation,invite")
_add("invite", "invitation,invite + create")  # the verb; "invites", "invited" name invitations
_add("onboard", "add,invitation,member")
_add("offboard", "remove,member")
_add("group,groups,squad,squads", "team")
_add("2fa,two factor,mfa", "two factor,2fa")
_add("email,emails,e mail", "email")
_add("profile,bio,avatar,public profile", "user,profile")
_add("billing,cost,costs,spend,spent,spending,invoice,usage,minutes,paying,pay for", "billing,usage")
_add("migrate,move over,import", "migration,import + start,create")
_add("audit log,audit logs", "audit log")
_add("unassign,deassign", "assignee + remove")
# tickets
_add("sub task,subtask,subtasks,sub tasks,child task,child tasks,child issue,child issues,sub issue,"
     "sub issues,parent issue,epic,epics", "sub issue")
_add("split,break down,break up", "sub issue + add")
_add("depends on,blocked by,blocking,dependency between,blocker,blockers", "blocked by,dependency")
_add("mention,mentions,mentioned", "mention")
_add("dupe,duplicate,duplicates", "duplicate")
# security
_add("disclose,privately report,report privately,responsible disclosure", "report,create")
_add("dependency,dependencies,deps,libraries,library", "dependency,dependencies")
_add("sbom,bill of materials", "sbom")
# pages, docs sites, domains
_add("custom domain,domain,domains,cname,dns", "cname,domain,pages")
_add("https,tls,ssl,certificate,cert,certs", "https,certificate")
_add("point,point to,point at", "update,set")
# codespaces and dev environments
_add("codespace,codespaces,dev environment,dev environments,cloud dev environment,devbox,dev box,cloud ide,"
     "online ide,dev container,devcontainer,remote dev", "codespace")
# stats
_add("additions,deletions,churn,lines added,lines deleted,lines changed,lines of code", "code frequency,stats")
_add("hours,hour,time of day,busiest,busiest hours", "punch card,hour")
_add("per week,weekly,each week,every week", "weekly,week,stats")
# render
_add("render,preview,markdown to html", "render,markdown")



# --- round 4: words for the same things seen from the caller's side
_add("reply,respond,answer,chime in", "comment + create")  # "replies" (a plural noun) names comments
_add("token,tokens,credential,credentials,api key,api keys,access token,access tokens", "token,credential,secret")
_add("register,enroll,enrol", "registration,register + create,add")  # "register my ssh key"
_add("registration", "registration,register")
_add("undo", "delete,remove,revert")
_add("report", "create,report")  # "report a green build status", "report a bug"
_add("annotation,annotations", "annotation,check run")
_add("kept,retention,retain,retained,keep around", "retention")
_add("code owner,code owners,codeowners,responsible for", "codeowners")
_add("everyone,everybody,all members,whole team", "member,user")
_add("integration,integrations,bot,bots,installed app,installed apps", "app,installation,integration")
_add("tests,test suite,test suites,test runs,ci checks", "status check,check")
_add("cooldown,cool down,cooling off,cooling off period", "interaction,limit,restriction")
_add("git hub", "git hub")  # "GitHub" (split at its capital) is one name, not the git_* tools
_add("why,what went wrong", "log,logs,annotation")  # "the build failed, show me why"
# "make sure nobody can force push": a rule on what may be done is a protection or a ruleset.
_add("nobody can,no one can,nobody may,prevent,forbid,disallow,only admins can", "protection,rule,restriction")
_add("force push,force pushes,force pushing,force pushed", "force push,protection")
_add("stars,stargazers,stargazer,star count", "stargazer,star")
_add("freeze,unfreeze", "lock,unlock")
_add("engineer,engineers,developer,developers,devs,teammate,teammates,hire,hires,new hire,new hires,"
     "intern,interns,newcomer,newcomers,joiner,joiners", "user,member")

# --- round 5: everyday words for GitHub's own terms
_add("undelete,bring back,recover,resurrect", "restore")  # "bring back the package we deleted"
_add("sticky,stick,keep at the top,to the top", "pin")  # a forum's "sticky" post is a pinned one
# "nobody should be able to reply": a rule on who may comment is a locked conversation.
_add("nobody should,no one should,stop anyone from,stop people from,prevent anyone from",
     "protection,rule,restriction,lock")
_add("from commenting,from replying,able to comment,able to reply,further comments,more comments,"
     "further replies,off topic,derailing,derailed,heated", "lock")
_add("recursive,recursively,every path,all paths,file tree,directory tree,folder structure,directory structure,"
     "folder tree", "tree")
_add("encrypt,encrypting,encryption,encrypted", "public key")  # secrets are sent sealed with one
_add("draft comments,draft review,unsubmitted,not submitted,without submitting", "pending,review")
_add("waiting on,done before,prerequisite,prerequisites,before it can start", "blocked by,dependency")
_add("shared with,share with", "selected,repositories")  # an org secret shared with repos
_add("board,boards,kanban,kanban board", "project,item")  # what's on the board: the project's items
_add("send,deliver", "create")  # "send an invite", "send push events to a URL": something new goes out
_add("push event,push events", "push,event,webhook")  # an event type, not the permission to push
_add("card,cards", "item")
_add("across github,across public repos,across all repos,across repos,anywhere on github,mentioning,"
     "that mention", "search")
_add("pushes,who pushed,push history,pushes and merges", "activity,activities,push")
_add("compared to,compared with,versus,vs", "compare,diff")


# Soft concepts: words that hint at what a tool is about without being what the caller asks for.
# They add a small bonus to tools that match them and never count against tools that do not
# ("list my gists": every gists list is a candidate; the one for the authenticated user is a bit
# more likely). They are detected before stop words are dropped: "my", "who" are stop words.
SOFT: dict[str, tuple[str, ...]] = {}
for _w in "my mine i me im own owned".split():
    SOFT[_w] = ("authenticated user", "authenticated", "current user")
for _w in "who whom whose someone somebody people".split():
    SOFT[_w] = ("user", "member", "people", "collaborator")


@dataclass(frozen=True, slots=True)
class Concept:
    """One thing the caller asked for: their words plus the spec phrases meaning the same.
    ``verb`` marks an action (create, list, delete, ...) rather than a thing."""

    said: str
    phrases: tuple[str, ...]
    participle: bool = False  # "added", "deleted", "failing": describes a thing, asks no action

    @property
    def verb(self) -> bool:
        return not self.participle and any(p in VERBS for p in self.phrases)


@dataclass(frozen=True, slots=True)
class Query:
    """A parsed query: the concepts it asks for (each counts toward a tool's coverage), the soft
    hints (a small bonus, never a cost) and the kind of operation it asks for."""

    concepts: tuple[Concept, ...]
    soft: tuple[Concept, ...]
    intent: Intent
    lead: str = ""  # the query's first word when it may be an imperative verb ("star the repo")
    question: bool = False  # "is the repo archived": asks for a fact, which a read's fields hold


# The action words specs name operations with.
VERBS = frozenset({"create", "list", "get", "delete", "remove", "update", "cancel", "re run", "rerun",
                   "rerequest", "dispatch", "download", "search", "redeliver", "transfer", "disable",
                   "enable", "approve", "merge", "set", "add", "dismiss", "lock", "unlock", "mark", "assign",
                   "block", "unblock", "revoke", "upload", "convert", "regenerate", "request"})

_MAX_KEY = max(len(k) for k in SYNONYMS)
_VERB_FORMS = frozenset(k[0] for k in SYNONYMS if len(k) == 1) | VERBS
_FIRST_WORDS = frozenset(k[0] for k in SYNONYMS)
# Keys meaning an action ("read" → get, "write" → create): ordinary words in "read/write".
_VERB_KEYS = frozenset(k[0] for k, alts in SYNONYMS.items() if len(k) == 1 and any(a in VERBS for g in alts for a in g))
# A person's name in a query ("does octocat have", "make carol an admin") hints at users.
NAME_HINT = ("user", "member", "username")


def _inflections(word: str) -> Iterator[str]:
    """The forms a map key may have for an inflected *word*: one suffix off ("tickets" → ticket,
    "deploying" → deploy, "merged" → merge). Deliberately lighter than a stemmer, which would
    also turn "findings" into "find" (a search verb): only whole inflections are undone."""
    if len(word) <= 4:
        return
    if word.endswith("ies"):
        yield word[:-3] + "y"
    if word.endswith("es"):
        yield word[:-2]
    if word.endswith("s") and not word.endswith("ss"):
        yield word[:-1]
    for suffix in ("ed", "ing"):
        if word.endswith(suffix):
            base = word[:-len(suffix)]
            yield from (base, base + "e")
            if len(base) > 2 and base[-1] == base[-2]:
                yield base[:-1]  # "starred" → star, "shipping" → ship


def _lookup(key: tuple[str, ...]) -> tuple[tuple[tuple[str, ...], ...] | None, bool]:
    """The alternatives of *key* and whether they name a thing rather than ask an action: found
    through an -ed/-ing form ("published") or as the plural of a verb ("requests", "reports":
    requests ask in the imperative, "request a review")."""
    alts = SYNONYMS.get(key)
    if alts is not None:
        return alts, False
    for form in _inflections(key[-1]):
        alts = SYNONYMS.get((*key[:-1], form))
        if alts is not None:
            return alts, key[-1].endswith(("ed", "ing", "s"))
    return None, False


def _known(word: str) -> bool:
    """Whether *word* is the vocabulary's: a stop word, a spec verb or (the start of) a map key."""
    return word in STOPWORDS or word in VERBS or word in _FIRST_WORDS or _lookup((word,))[0] is not None


def _phrasal(key: tuple[str, ...]) -> tuple[tuple[str, ...], ...] | None:
    """The map's meaning of a two-word phrasal verb ("kick out", "turn off"), if it is one."""
    return SYNONYMS.get(key)


def _ordinary(word: str) -> bool:
    """Whether *word* in ``x/y`` is an ordinary word (``read/write``, ``and/or``, ``ci/cd``),
    not part of an owner/name."""
    return len(word) <= 2 or word in STOPWORDS or word in _VERB_KEYS


# "+1", "+1'd", "-1": the thumbs-up (down) reaction; punctuation would leave the number alone.
_PLUS_ONE = re.compile(r"(?<![\w+-])[+-]1(?:'?d|'?s|ed|ing)?(?!\w)")


def parse(query: str, named: Callable[[str], bool] | None = None) -> Query:
    """The concepts, soft hints and intent of *query*; *named* (optional) says whether the catalog
    names a tool with a word (no person is called "issue" or "webhook")."""
    query = _PLUS_ONE.sub(" upvote ", query)  # "+1'd", "-1": a reaction, not the number 1
    args = tokens(query, _ordinary)
    words = [w for w in args.words if not w.isdigit()]  # a count left in ("top 10") asks nothing
    words = words[_frame(words):]  # "how do I delete a branch" asks to delete a branch
    sense = senses(words, _known, _phrasal, named)
    special = sense.skip | sense.values | sense.states | set(sense.alts)
    out: list[Concept] = []
    hints: list[str] = []  # words that may carry a soft hint: not those of a phrase asking nothing
    values: list[str] = []  # new values and names: soft hints only
    i = 0
    while i < len(words):
        if i in sense.skip:
            i += 1
            continue
        if i in sense.values:
            values.append(words[i])
            i += 1
            continue
        if i in sense.states:
            # "open" in "Retrieve open pull requests": the state, not "create".
            out.append(Concept(words[i], ("open" if words[i] == "opened" else words[i],), True))
            hints.append(words[i])
            i += 1
            continue
        if i in sense.alts:
            out.extend(Concept(words[i], group) for group in sense.alts[i])
            hints.append(words[i])
            i += 1
            continue
        undo = _undo(out, words, i)
        if undo is not None:
            out.extend(undo)
            hints.append(words[i])
            i += 1
            continue
        longest = min(_MAX_KEY, len(words) - i)
        longest = next((n for n in range(1, longest) if i + n in special), longest)
        for n in range(longest, 0, -1):
            key = tuple(words[i:i + n])
            alts, participle = _lookup(key)
            if alts is not None:
                said = " ".join(key)
                if participle:
                    # "published", "added": a state, not the action; the map's action words
                    # (create, update) would pull in every tool that does it.
                    alts = tuple(g for g in (tuple(a for a in group if a not in VERBS) for group in alts) if g) \
                        or ((),)
                for j, group in enumerate(alts):
                    # The caller's own word counts for the first concept it stands for.
                    keep = j == 0 and said not in STOPWORDS
                    out.append(Concept(said, (said, *[a for a in group if a != said]) if keep else group,
                                       participle))
                if alts:
                    hints.extend(key)
                i += n
                break
        else:
            hints.append(words[i])
            if words[i] not in STOPWORDS and len(words[i]) > 1:
                out.append(Concept(words[i], (words[i],)))
            i += 1
    # "make a new repo": one action asked for once, not twice.
    seen: set[frozenset[str]] = set()
    kept = []
    for c in out:
        means = frozenset(p for p in c.phrases if p != c.said) or frozenset(c.phrases)
        if means and means not in seen:
            seen.add(means)
            kept.append(c)
    # "repositories owned by user sindresorhus": someone else's, not the caller's own.
    others = {w for k, w in enumerate(words[:-2]) if w in ("own", "owned") and words[k + 1] == "by"
              and words[k + 2] not in ("me", "us", "myself", "i")}
    soft = {SOFT[w]: w for w in hints if w in SOFT and w not in others}
    soft.update({(v,): v for v in values})
    if "path" in args.kinds and words and words[0] in _COMMITTING:
        # "commit an updated package.json to main", "push README.md": a file's contents written.
        kept.append(Concept("(file)", ("content", "contents", "file")))
    if sense.names and not any(set(c.phrases) & set(NAME_HINT) for c in kept):
        # "what repos does octocat have": the name stands for a user, a thing the tool is about.
        kept.append(Concept("(name)", NAME_HINT))
    intent = query_intent(words, (c.phrases for c in kept if c.verb))
    if sense.yes_no and not intent.strong:
        intent = Intent(READ, True)
    if not intent.strong and len(words) > 2 and words[1] in _ARTICLES and words[0] not in STOPWORDS \
            and not _plural(words[0]):
        # "tag a release", "pin the issue": a sentence that opens "WORD a/the ..." is an
        # imperative, and a verb no reading word the map knows asks for a change.
        intent = Intent(WRITE, False)
    soft.update({HINTS[k]: k for k in args.kinds if k != "one"})
    # "who starred", "who are ..." ask for people (several; "who is" for one); a plural thing asks
    # for a collection.
    plural = sense.people or words[:2] == ["who", "are"] or any(_plural(c.said) for c in kept if not c.verb) \
        or any(w in ("every", "all", "each") for w in words)  # "every label we use"
    # "this PR" is one item, but in "who has been asked to review this PR" the answer is people.
    one = "one" in args.kinds or (sense.this and (words[:1] != ["who"] or words[1:2] in (["is"], ["was"])))
    if intent.kind == READ and (sense.yes_no or (words and words[0] in _YES_NO)):
        # "is alice a member of the org", "has this PR been merged": a yes/no question is what
        # APIs answer with a check (204 or 404), not with a list.
        soft[("check",)] = "(yes/no)"
    elif intent.kind == READ and (any(w in ONE_ITEM for w in words) or (one and not plural)):
        # "details of ...", "workflow run 123": that one thing, not a list ("PR 12's comments" is).
        soft[HINTS["one"]] = "(one)"
    elif intent.kind == READ and plural:
        # A read of plural things ("the PRs still open", "recent commits") asks for a collection.
        soft[("list",)] = "(plural)"
    lead = hints[0] if hints and hints[0] not in STOPWORDS else ""
    # A question, or a read listing what it wants to see ("... including bio and follower count"),
    # asks for facts: the fields a read answers with.
    facts = is_question(words) or sense.yes_no or (intent.kind == READ and "including" in words)
    return Query(tuple(kept), tuple(Concept(w, p) for p, w in soft.items()), intent, lead, facts)


_YES_NO = frozenset("is are was were does do did has have can".split())
_COMMITTING = frozenset("commit push upload save write put add".split())
_ARTICLES = frozenset("a an the this that".split())
_STOP_DOING = frozenset({"stop", "quit", "cease"})


# Frames around a request that say nothing about it: "how do I ...", "is there a way to ...",
# "I'd like to ...". What follows them is the request (its verb decides the intent).
_FRAMES = tuple(tuple(f.split()) for f in (
    "how do i", "how do we", "how do you", "how can i", "how can we", "how would i", "how should i",
    "how to", "is it possible to", "is there a way to", "is there any way to", "can i", "can we",
    "could i", "could we", "i d like to", "i would like to", "i m trying to", "i am trying to",
    "we re trying to", "trying to", "i want to", "we want to", "i need to", "we need to",
    "what is the call to", "which api", "what endpoint", "which endpoint"))


def _frame(words: list[str]) -> int:
    """How many leading *words* are a frame asking nothing (0 if none; the longest wins)."""
    return max((len(f) for f in _FRAMES if tuple(words[:len(f)]) == f and len(words) > len(f)), default=0)


def _undo(out: list[Concept], words: list[str], i: int) -> list[Concept] | None:
    """"stop following", "quit watching": the un-action of the -ing verb after "stop" (unfollow,
    delete the subscription), replacing the "cancel" that "stop" alone means (edits *out*)."""
    if i == 0 or words[i - 1] not in _STOP_DOING or not words[i].endswith("ing") or len(words[i]) < 6:
        return None
    if out and out[-1].said == words[i - 1]:
        out.pop()
    forms = list(_inflections(words[i]))
    base = next((f for f in forms if f in _VERB_FORMS), forms[0] if forms else words[i])
    said = f"{words[i - 1]} {words[i]}"
    return [Concept(said, ("un" + base, "delete", "remove", "disable")), Concept(words[i], (words[i], base))]


def _plural(word: str) -> bool:
    return len(word) > 2 and word.endswith("s") and not word.endswith(("ss", "us", "is"))


def expand(query: str) -> list[Concept]:
    """The concepts of *query*: longest synonym keys first, stop words dropped, order kept."""
    return list(parse(query).concepts)
