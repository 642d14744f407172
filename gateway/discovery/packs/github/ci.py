"""CI/CD and what it makes: workflows and their runs, jobs, logs, runners, artifacts, checks,
deployments and environments, packages, Pages sites and their domains, codespaces, webhooks.

Entries of the GitHub pack's map (:mod:`gateway.discovery.packs.github`); see its rules there.
"""

from __future__ import annotations

from gateway.discovery.packs.github.table import add

add("pipeline,pipelines,ci,build,builds", "workflow run,workflow,actions,check")
add("job", "job,workflow run")
add("green,passing,passed,failing,red,status", "status,check")
add("machine,machines,agent,agents,worker,workers", "runner")
add("hosted ourselves,our own", "self hosted")
add("artifact,artifacts,test results,test reports,coverage report,coverage reports", "artifact")
add("binary,binaries,build output", "artifact,asset")
add("nightly,cron,scheduled", "workflow")
add("site,website,docs site", "pages")
add("hook,hooks,callback,callbacks,notify", "webhook,hook")
add("image,images,container,containers,docker,npm,maven,nuget,rubygems", "package")
add("prod,production,staging,stage,qa,env,envs,environments", "environment")
add("deploy to,deploys to,deployment target,deployment targets", "environment,deployment")
add("cd", "deployment")
add("step,steps", "job,step")
add("warning,warnings,warned,warn,errors,problems,findings", "annotation,alert,warning")
add("flaky,flake", "re run,rerun")
add("rebuild,redeploy,republish,re deploy", "build,re run,request")
add("badge,badges", "workflow,status")
add("custom domain,domain,domains,cname,dns", "cname,domain,pages")
add("point,point to,point at", "update,set")
add("codespace,codespaces,dev environment,dev environments,cloud dev environment,devbox,dev box,cloud ide,"
    "online ide,dev container,devcontainer,remote dev", "codespace")
add("annotation,annotations", "annotation,check run")
add("tests,test suite,test suites,test runs,ci checks", "status check,check")
add("why,what went wrong", "log,logs,annotation")  # "the build failed, show me why"
add("push event,push events", "push,event,webhook")  # an event type, not the permission to push
# round 6: what went out to an environment is a deployment, not a release
add("shipped to,ship to,ships to,went out to,released to,rolled out to,pushed to production", "deployment,environment")
add("runs,ci runs,build runs", "workflow run,check run,run")
