"""General words about time ("latest") and spelling ("licence").

Entries of the core vocabulary map (:mod:`gateway.discovery.vocabulary`); see its rules there.
"""

from __future__ import annotations

from gateway.discovery.vocabulary.table import add

add("last,latest,newest,most recent,current", "latest")
add("licence,licenses,licences", "license")
