"""Verbs whose meaning is GitHub's: "move" → transfer (a repository or an issue), "approve" →
a review, "copy" → fork, "kick off" → a workflow dispatch, "close"/"reopen" → an update (of an
issue), "clear" → mark notifications read, "cut" → a release.

Entries of the GitHub pack's map (:mod:`gateway.discovery.packs.github`); see its rules there.
"""

from __future__ import annotations

from gateway.discovery.packs.github.table import add

add("file a,raise,leave,share,plan", "create")
add("kick off,trigger,run by hand,launch,fire", "dispatch,create")
add("retry,rerun,re run,restart,redo", "re run,rerun,rerequest")
add("force,forcibly,hard,hung,stuck,frozen", "force")
add("close,reopen,archive", "update")
add("resend,redeliver,replay", "redeliver")
add("move,hand over", "transfer")
add("approve,sign off,lgtm,looks good,look good,good to go,good to merge", "approve,review + create")  # a new review
add("publish", "create,release,pages")
add("mark,mark as", "mark,set,update,create")
add("grant,give access,let,give", "add,create,grant")
add("let people", "enable,unlock,add")
add("again,back", "un,re")
add("copy,make a copy", "fork")
add("promote,demote,downgrade", "role,membership + set,update")
add("clear", "delete,remove,mark,reset")
add("cut", "create")
add("undo", "delete,remove,revert")
add("report", "create,report")  # "report a green build status", "report a bug"
add("freeze,unfreeze", "lock,unlock")
# round 6
add("apply,slap", "add,set")  # "apply the bug label to #12"
add("reclaim,take back,free up", "remove,delete,cancel,revoke")
