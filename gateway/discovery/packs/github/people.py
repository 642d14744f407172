"""People: users, members, collaborators, teams, roles and permissions, invitations, the
caller's own account, notifications, apps acting for someone.

Entries of the GitHub pack's map (:mod:`gateway.discovery.packs.github`); see its rules there.
"""

from __future__ import annotations

from gateway.discovery.packs.github.table import add

add("access,permission,permissions,write access,push", "collaborator,permission")
add("logged in,who am i,myself,my account,i am", "authenticated user,authenticated")
add("contributed,contributors,authors", "contributor")
add("admin,admins,administrator,maintainer,maintainers,role,roles", "role,membership,admin")
add("rights,privileges,privilege,push rights,push access,commit access,admin rights",
    "permission,collaborator")
add("contractor,contractors,outside,outsider,outsiders,external,guest,guests,non member,non members",
    "outside collaborator")
add("group,groups,squad,squads", "team")
add("code owner,code owners,codeowners,responsible for", "codeowners")
add("integration,integrations,bot,bots,installed app,installed apps", "app,installation,integration")
# round 6
add("copilot license,copilot licenses,copilot seat,copilot seats,seat,seats", "seat,copilot")
add("custom role,custom roles,org role,org roles,organization role,organization roles", "organization role,role")
