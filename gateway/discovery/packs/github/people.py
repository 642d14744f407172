"""People: users, members, collaborators, teams, roles and permissions, invitations, the
caller's own account, notifications, apps acting for someone.

Entries of the GitHub pack's map (:mod:`gateway.discovery.packs.github`); see its rules there.
"""

from __future__ import annotations

from gateway.discovery.packs.github.table import add

add("person,people,someone,employee,employees,colleague,coworker", "user,member")
add("access,permission,permissions,write access,push", "collaborator,permission")
add("logged in,who am i,myself,my account,i am", "authenticated user,authenticated")
add("inbox,unread,notifications", "notification")
add("contributed,contributors,authors", "contributor")
add("who is in,members,membership,belongs to", "member")
add("admin,admins,administrator,maintainer,maintainers,role,roles", "role,membership,admin")
add("rights,privileges,privilege,push rights,push access,commit access,admin rights",
    "permission,collaborator")
add("ban,blacklist,blocklist,block", "block")
add("unban,unblock", "unblock")
add("troll,trolls,spammer,spammers,abuser,bad actor", "user")
add("contractor,contractors,outside,outsider,outsiders,external,guest,guests,non member,non members",
    "outside collaborator")
add("invites,invitation,invitations,invited,pending invite", "invitation,invite")
add("invite", "invitation,invite + create")  # the verb; "invites", "invited" name invitations
add("onboard", "add,invitation,member")
add("offboard", "remove,member")
add("group,groups,squad,squads", "team")
add("2fa,two factor,mfa", "two factor,2fa")
add("email,emails,e mail", "email")
add("profile,bio,avatar,public profile", "user,profile")
add("unassign,deassign", "assignee + remove")
add("code owner,code owners,codeowners,responsible for", "codeowners")
add("everyone,everybody,all members,whole team", "member,user")
add("integration,integrations,bot,bots,installed app,installed apps", "app,installation,integration")
add("engineer,engineers,developer,developers,devs,teammate,teammates,hire,hires,new hire,new hires,"
    "intern,interns,newcomer,newcomers,joiner,joiners", "user,member")
# round 6
add("copilot license,copilot licenses,copilot seat,copilot seats,seat,seats", "seat,copilot")
add("custom role,custom roles,org role,org roles,organization role,organization roles", "organization role,role")
