# Logs one finished aiperf run to Weights & Biases as AIPerf's exporter does: wandb.init with
# the configuration and tags, a "summary_metrics" table, an "aiperf-run" artifact of the
# files. The run is described by a JSON document on stdin; the run's id, URL and directory
# are printed as JSON on stdout. Exit 3: the wandb package is not installed.
import json
import sys

try:
    import wandb
except ImportError:
    sys.stderr.write("the wandb Python package is not installed\n")
    sys.exit(3)

p = json.load(sys.stdin)
run = wandb.init(
    entity=p["entity"],
    project=p["project"],
    name=p["name"],
    dir=p["dir"],
    config=p["config"],
    tags=p["tags"],
    settings=wandb.Settings(x_disable_meta=True, save_code=False),
)
try:
    run.log({"summary_metrics": wandb.Table(columns=p["columns"], data=p["rows"])})
    if p["files"]:
        artifact = wandb.Artifact(name=f"aiperf-{run.id}", type="aiperf-run")
        for path, name in p["files"]:
            artifact.add_file(path, name=name)
        run.log_artifact(artifact)
finally:
    run.finish()
print(json.dumps({"id": run.id, "url": run.url, "dir": run.dir}))
