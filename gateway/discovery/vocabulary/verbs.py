"""Verbs: how callers ask for an action in the CRUD words specs use, phrasal verbs included, and
phrases that ask nothing ("give me") -- only what is true of any API ("remove" → delete, "show
all" → list, "turn off" → disable). A verb whose meaning is one API's ("move" → transfer,
"approve" → a review, "copy" → fork) is that API's pack's (:mod:`gateway.discovery.packs`).

Entries of the core vocabulary map (:mod:`gateway.discovery.vocabulary`); see its rules there.
"""

from __future__ import annotations

from gateway.discovery.vocabulary.table import add

add("open,make,new,add,start,begin,set up,post,write,record", "create")
add("stop,abort,kill,halt", "cancel")
add("remove,drop,destroy,erase,kick,kick out,clean up", "delete,remove")
add("edit,change,modify", "update")
add("fix,correct,amend,adjust,tweak,reword,revise,touch up", "update")
add("set", "set,update")
add("list,show all,which,enumerate,what are", "list")
add("find,look for,search for,search", "search")
add("look up", "get")
add("read,see,view,look at,download", "get,download")
add("turn off,switch off,pause", "disable")
add("turn on,switch on,resume", "enable")
# Phrases that ask nothing ("give me the logs" asks for logs, not for giving).
add("give me,give us,show me,tell me,let me know,can you,could you", "")
add("off", "remove,delete")
add("back on,turn back on", "enable")
add("tear down,take down,shut down,decommission,dismantle,disband", "delete,remove")
add("rename", "rename,update")
add("store,save,stash,put,persist", "create,update,set")
add("purge,wipe,flush,empty,prune,evict,invalidate", "delete,remove")
add("nuke,zap,trash,scrap,ditch,axe", "delete,remove")
add("convert,turn into", "convert,update")
add("request,ask for", "request,create")
add("spin up,provision,stand up", "create")
add("undelete,bring back,recover,resurrect", "restore")  # "bring back the package we deleted"
add("send,deliver", "create")  # "send an invite": something new goes out
add("configure,reconfigure,customize,customise", "update,set,create")
add("unregister,deregister,de register,unenroll,disenroll", "delete,remove")  # register's un-action
add("overwrite,replace,swap out,replace all", "replace,set,update")
# Taking something or someone off, away or out is removing it, whatever the API ("take jake off the
# project", "get rid of the old key"); was the github pack's, it is English (moved, same meaning).
add("take off,take away,take out,get rid of,throw away,throw out,discard,strip", "remove,delete,dismiss")

