"""General nouns in GitHub's world: how people name what GitHub calls events and timelines, its
meta (IP ranges), exports and migrations, billing, rendering, audit logs, and GitHub itself.

Entries of the GitHub pack's map (:mod:`gateway.discovery.packs.github`); see its rules there.
"""

from __future__ import annotations

from gateway.discovery.packs.github.table import add

add("history,happened,timeline,audit trail,what happened", "event,timeline,history,activity")
add("ip,ips,ip range,ip ranges,ip address,ip addresses,allowlist", "ip address,meta")
add("waiting,awaiting,outstanding,unmerged,not merged", "open,pending")
add("export,back up,backup,backups", "migration,export,archive")
add("doing,been doing,up to", "event,activity")
add("billing,cost,costs,spend,spent,spending,invoice,usage,minutes,paying,pay for", "billing,usage")
add("migrate,move over,import", "migration,import + start,create")
add("audit log,audit logs", "audit log")
add("render,preview,markdown to html", "render,markdown")
add("git hub", "git hub")  # "GitHub" (split at its capital) is one name, not the git_* tools
