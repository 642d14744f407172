"""Tickets and conversations: issues, labels, milestones, reactions, comments, sub-issues,
dependencies, pinned and locked conversations, project boards.

Entries of the GitHub pack's map (:mod:`gateway.discovery.packs.github`); see its rules there.
"""

from __future__ import annotations

from gateway.discovery.packs.github.table import add

add("ticket,tickets,bug,bugs,incident,incidents,task,tasks", "issue")
add("tag,tag as,tag with,categorize,categorise", "label,tag,topic")
add("sprint,sprints,deadline", "milestone")
add("thumbs up,upvote,like,emoji,+1,heart,thumbs down,downvote,laugh,hooray,rocket,eyes", "reaction")
add("react,react to", "reaction + create")
add("note,message,messages", "comment")
add("discussion,conversation,thread", "issue,comment,conversation,timeline")
add("say,said,wrote,feedback,remark,remarks", "comment,review")
add("line by line,inline,line comments,on a line", "review comment,comment")
add("talk,discuss,chat", "conversation,comment")
add("sub task,subtask,subtasks,sub tasks,child task,child tasks,child issue,child issues,sub issue,"
    "sub issues,parent issue,epic,epics", "sub issue")
add("split,break down,break up", "sub issue + add")
add("depends on,blocked by,blocking,dependency between,blocker,blockers", "blocked by,dependency")
add("mention,mentions,mentioned", "mention,search")
add("reply,respond,answer,chime in", "comment + create")  # "replies" (a plural noun) names comments
add("sticky,stick,keep at the top,to the top", "pin")  # a forum's "sticky" post is a pinned one
add("from commenting,from replying,able to comment,able to reply,further comments,more comments,"
    "further replies,off topic,derailing,derailed,heated", "lock")
add("waiting on,done before,prerequisite,prerequisites,before it can start", "blocked by,dependency")
add("board,boards,kanban,kanban board", "project,item")  # what's on the board: the project's items
add("card,cards", "item")
