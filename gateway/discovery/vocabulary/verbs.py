"""Verbs: how callers ask for an action (open, kick off, nuke, tear down ...) in the CRUD
words specs use, phrasal verbs included, and phrases that ask nothing ("give me").

Entries of the vocabulary map (:mod:`gateway.discovery.vocabulary`); see its rules there.
"""

from __future__ import annotations

from gateway.discovery.vocabulary.table import add

add("open,make,new,add,start,begin,file a,raise,set up,leave,post,write,share,record,plan", "create")
add("kick off,trigger,run by hand,launch,fire", "dispatch,create")
add("retry,rerun,re run,restart,redo", "re run,rerun,rerequest")
add("stop,abort,kill,halt", "cancel")
add("force,forcibly,hard,hung,stuck,frozen", "force")
add("remove,drop,destroy,erase,kick,kick out,clean up", "delete,remove")
add("close,reopen,edit,change,modify,archive", "update")
add("fix,correct,amend,adjust,tweak,reword,revise,touch up", "update")
add("set", "set,update")
add("list,show all,which,enumerate,what are", "list")
add("find,look for,search for,search", "search")
add("look up", "get")
add("read,see,view,look at,download", "get,download")
add("resend,redeliver,replay", "redeliver")
add("move,hand over", "transfer")
add("turn off,switch off,pause", "disable")
add("turn on,switch on,resume", "enable")
add("approve,sign off,lgtm,looks good,look good,good to go,good to merge", "approve,review + create")  # a new review
add("assign,give to,hand to", "assignee,assign")
add("publish", "create,release,pages")
add("take off,take away,take out,get rid of,throw away,throw out,discard,strip", "remove,delete,dismiss")
add("mark,mark as", "mark,set,update,create")
add("grant,give access,let,give", "add,create,grant")
add("let people", "enable,unlock,add")
# Phrases that ask nothing ("give me the logs" asks for logs, not for giving).
add("give me,give us,show me,tell me,let me know,can you,could you", "")
add("again,back", "un,re")
add("off", "remove,delete")
add("back on,turn back on", "enable")
add("tear down,take down,shut down,decommission,dismantle,disband", "delete,remove")
add("rename", "rename,update")
add("copy,make a copy", "fork")
add("store,save,stash,put,persist", "create,update,set")
add("purge,wipe,flush,empty,prune,evict,invalidate", "delete,remove")
add("nuke,zap,trash,scrap,ditch,axe", "delete,remove")
add("promote,demote,downgrade", "role,membership + set,update")
add("clear", "delete,remove,mark,reset")
add("convert,turn into", "convert,update")
add("request,ask for", "request,create")
add("cut,spin up,provision,stand up", "create")
add("undo", "delete,remove,revert")
add("report", "create,report")  # "report a green build status", "report a bug"
add("freeze,unfreeze", "lock,unlock")
add("undelete,bring back,recover,resurrect", "restore")  # "bring back the package we deleted"
add("send,deliver", "create")  # "send an invite", "send push events to a URL": something new goes out
# round 6
add("configure,reconfigure,customize,customise", "update,set,create")
add("apply,slap", "add,set")  # "apply the bug label to #12"
add("reclaim,take back,free up", "remove,delete,cancel,revoke")
add("unregister,deregister,de register,unenroll,disenroll", "delete,remove")  # register's un-action
add("overwrite,replace,swap out,replace all", "replace,set,update")
