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

from collections.abc import Iterator
from dataclasses import dataclass

from gateway.discovery.intent import READ, Intent, query_intent
from gateway.discovery.words import split_words

__all__ = ["Concept", "Query", "parse", "expand", "STOPWORDS", "SYNONYMS", "SOFT", "VERBS"]

# Words that carry no intent in a request ("show me the ...", "what is ...").
STOPWORDS = frozenset("""
a an the me my mine i we our us you your it its this that these those is are was were be been being
am do does did to of for in on at by with from into onto about as and or but so than then there
here what which who whom whose how many much any some all every each please can could would should
will shall may might must just still yet now right currently lately recently really very also
has have had having let lets one ones up out them they their thing things get give show want need
""".split())

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
_add("repo,repos,project,projects,codebase", "repository,repo")
_add("org,orgs,company,organisation", "organization,org")
_add("diff,difference,differences", "compare")
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
_add("tag,tag as,tag with,categorize,categorise", "label,tag")
_add("sprint,sprints,deadline", "milestone")
_add("thumbs up,upvote,like,emoji,+1", "reaction")
_add("reply,note", "comment")
_add("discussion,conversation,thread", "issue,lock,conversation")
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
_add("artifact,artifacts,binary,binaries", "artifact")
_add("nightly,cron,scheduled", "workflow")
_add("site,website,docs site", "pages")
_add("hook,hooks,callback,callbacks,notify", "webhook,hook")
# --- security
_add("vulnerable,vulnerability,vulnerabilities,cve,cves", "dependabot alert,dependabot,advisory")
_add("leaked,leak,password,passwords,credential,credentials,token,tokens", "secret scanning,secret")
_add("static analysis,sast,lint,linter", "code scanning")
_add("throttled,throttle,quota,api calls", "rate limit")
_add("protect,protection,require reviews,guard", "protection")
# --- people
_add("person,people,someone,employee,employees,colleague,coworker", "user,member")
_add("access,permission,permissions,write access,push", "collaborator,permission")
_add("logged in,who am i,myself,my account,i am", "authenticated user,authenticated")
_add("inbox,unread,notifications", "notification")
_add("contributed,contributors,authors", "contributor")
_add("looked at,visits,visitors,traffic,views", "views,traffic")
_add("languages,language,written in", "language")
# --- verbs
_add("open,make,new,add,start,begin,file a,raise,set up,leave,post,write,share,record,plan", "create")
_add("kick off,trigger,run by hand,launch,fire", "dispatch,create")
_add("retry,rerun,re run,restart,redo", "re run,rerun,rerequest")
_add("stop,abort,kill,halt", "cancel")
_add("remove,drop,destroy,erase,kick,kick out,clean up", "delete,remove")
_add("close,reopen,edit,change,modify,archive", "update")
_add("list,show all,which,enumerate,what are", "list")
_add("find,look for,look up,search for,search", "search")
_add("who is in,members,membership,belongs to", "member")
_add("fetch,read,see,view,look at,download", "get,download")
_add("resend,redeliver,replay", "redeliver")
_add("move,hand over", "transfer")
_add("turn off,switch off,pause", "disable")
_add("turn on,switch on,resume", "enable")
_add("approve,sign off,lgtm", "approve,review")
_add("assign,give to,hand to", "assignee,assign")
_add("publish", "create,release,pages")
_add("take off,take away,take out,get rid of,throw away,throw out,discard,strip", "remove,delete,dismiss")
_add("mark,mark as", "mark,set,update,create")
_add("grant,give access,let", "add,create")
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
_add("info,information,particulars", "get")
_add("rename", "rename,update")
_add("image,images,container,containers,docker,npm,maven,nuget,rubygems", "package")
_add("only let,limit who,restrict,restrict who,lock down", "restriction,limit,interaction")
_add("export,back up,backup,backups", "migration,export,archive")
_add("copy,make a copy", "fork")
_add("doing,been doing,up to", "event,activity")



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


# The action words specs name operations with.
VERBS = frozenset({"create", "list", "get", "delete", "remove", "update", "cancel", "re run", "rerun",
                   "rerequest", "dispatch", "download", "search", "redeliver", "transfer", "disable",
                   "enable", "approve", "merge", "set", "add", "dismiss", "lock", "unlock", "mark"})

_MAX_KEY = max(len(k) for k in SYNONYMS)
_VERB_FORMS = frozenset(k[0] for k in SYNONYMS if len(k) == 1) | VERBS


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
    """The alternatives of *key* and whether they were found through an -ed/-ing form."""
    alts = SYNONYMS.get(key)
    if alts is not None:
        return alts, False
    for form in _inflections(key[-1]):
        alts = SYNONYMS.get((*key[:-1], form))
        if alts is not None:
            return alts, key[-1].endswith(("ed", "ing"))
    return None, False


def parse(query: str) -> Query:
    """The concepts, soft hints and intent of *query*."""
    words = split_words(query)
    out: list[Concept] = []
    hints: list[str] = []  # words that may carry a soft hint: not those of a phrase asking nothing
    i = 0
    while i < len(words):
        undo = _undo(out, words, i)
        if undo is not None:
            out.extend(undo)
            hints.append(words[i])
            i += 1
            continue
        for n in range(min(_MAX_KEY, len(words) - i), 0, -1):
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
        if means not in seen:
            seen.add(means)
            kept.append(c)
    soft = {SOFT[w]: w for w in hints if w in SOFT}
    intent = query_intent(words, (c.phrases for c in kept if c.verb))
    # A read of plural things ("the PRs still open", "recent commits") asks for a collection.
    if intent.kind == READ and any(_plural(c.said) for c in kept if not c.verb):
        soft[("list",)] = "(plural)"
    lead = hints[0] if hints and hints[0] not in STOPWORDS else ""
    return Query(tuple(kept), tuple(Concept(w, p) for p, w in soft.items()), intent, lead)


_STOP_DOING = frozenset({"stop", "quit", "cease"})


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
