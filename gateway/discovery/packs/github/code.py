"""Source hosting and code review: repositories, pull requests, branches, commits, files,
releases and tags, and the statistics and traffic of a repository.

Entries of the GitHub pack's map (:mod:`gateway.discovery.packs.github`); see its rules there.
"""

from __future__ import annotations

from gateway.discovery.packs.github.table import add

add("pr,prs,mr,mrs,merge request,merge requests,patch,patches", "pull request,pull")
add("land,ship it", "merge")
add("repo,repos,repository,repositories,project,projects,codebase", "repository,repo")
add("diff,difference,differences,between,changed between,differ", "compare")
add("grep", "search code,code")
add("branch", "branch,ref")
add("commit,sha,revision", "commit,ref")
add("fork", "fork + create")  # "fork acme/tool into my account": a new repository
add("sync", "merge upstream,sync")
add("file,files", "file,content,contents")
add("snippet,paste", "gist")
add("star,bookmark", "star")
add("readme", "readme")
add("ship", "release + create")
add("shipped,version,versions", "release")
add("looked at,visit,visits,visited,visitors,traffic,views", "views,traffic")
add("bump", "release,tag + create")
add("come from,comes from,coming from,came from", "referrer,referral,source")
add("pull request,pull requests", "pull request,pull")
add("review request,review requests", "review request,requested reviewers")
add("yank,unpublish,pull down", "delete,remove")
add("asset,assets,attachment,attachments,downloads,downloadable,tarball,zipball,installer", "asset")
add("attach", "upload,asset")
add("changelog,changelogs", "release notes,release")
add("prerelease,pre release,beta,rc,release candidate", "prerelease,release")
add("topic,topics,keyword,keywords", "topic")
add("request changes,changes requested,reject,needs work", "review,submit review")
add("squash,rebase,fast forward", "merge")
add("blame,last changed,last modified,last touched,git log,commit history,commit log,git history",
    "commit,commits")
add("hash,commit id,commit hash", "commit,sha,ref")
add("tip,head,tip of", "ref,branch")
add("default branch", "default branch")
add("conflict,conflicts,mergeable,mergeability", "mergeable")
add("referrer,referrers,referring sites,referring site,referral,referrals,traffic sources,"
    "traffic source,send visitors,sends visitors,send traffic", "referrer,referral")
add("clones,cloned,clone count", "clones,clone")
add("popular,most viewed,top pages,top paths", "popular,top")
add("autolink,autolinks,jira,tracker,issue tracker,external tracker,external references", "autolink,reference")
add("watch,subscribe", "subscription,watch + set")
add("watchers,subscribers,watcher,subscriber,watching", "watcher,subscriber")
add("unwatch,unsubscribe,mute,ignore", "subscription + delete,ignored")
add("additions,deletions,churn,lines added,lines deleted,lines changed,lines of code", "code frequency,stats")
add("hours,hour,time of day,busiest,busiest hours", "punch card,hour")
add("per week,weekly,each week,every week", "weekly,week,stats")
add("stars,stargazers,stargazer,star count", "stargazer,star")
add("recursive,recursively,every path,all paths,file tree,directory tree,folder structure,directory structure,"
    "folder tree", "tree")
add("draft comments,draft review,unsubmitted,not submitted,without submitting", "pending,review")
add("across github,across public repos,across all repos,across repos,anywhere on github,mentioning,"
    "that mention", "search")
add("pushes,pushed,who pushed,push history,pushes and merges", "activity,activities,push")
# round 6
add("commit message,commit messages", "commit,message")  # a commit's own text, not a comment on it
add("ignore file,ignore files,gitignore,git ignore", "gitignore,template")
add("tar,tgz,tar gz,zip,zip file,zip archive,source archive,source archives,source tarball", "tarball,zipball,archive")
add("out of date,up to date,catch up,behind", "update branch,merge upstream")  # behind its base or upstream: merge it in
add("reviewer list,reviewers list,list of reviewers", "requested reviewers,reviewer")
add("previous version,earlier version,older version,old version,prior version", "revision,history")
add("brought in,brings in,bring in,introduced,introduces,landed in,came in with", "associated")  # which PR brought in a commit
