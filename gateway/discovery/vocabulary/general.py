"""General nouns: how people name what APIs call events, history, addresses, licences,
exports and migrations, billing, rendering, and words about time ("latest").

Entries of the vocabulary map (:mod:`gateway.discovery.vocabulary`); see its rules there.
"""

from __future__ import annotations

from gateway.discovery.vocabulary.table import add

add("last,latest,newest,most recent,current", "latest")
add("history,happened,timeline,audit trail,what happened", "event,timeline,history,activity")
add("ip,ips,ip range,ip ranges,ip address,ip addresses,allowlist", "ip address,meta")
add("waiting,awaiting,outstanding,unmerged,not merged", "open,pending")
add("licence,licenses,licences", "license")
add("export,back up,backup,backups", "migration,export,archive")
add("doing,been doing,up to", "event,activity")
add("billing,cost,costs,spend,spent,spending,invoice,usage,minutes,paying,pay for", "billing,usage")
add("migrate,move over,import", "migration,import + start,create")
add("audit log,audit logs", "audit log")
add("render,preview,markdown to html", "render,markdown")
add("git hub", "git hub")  # "GitHub" (split at its capital) is one name, not the git_* tools
