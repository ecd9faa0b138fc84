# Prints what an offline W&B run recorded (run name, project, tags, config, summary) as JSON,
# read from its run-<id>.wandb file; run with the python of a venv that has wandb.
import json, struct, sys
from wandb.proto import wandb_internal_pb2 as pb

BLOCK = 32768


def records(path):
    """The protobuf records of a .wandb file (LevelDB's log format after a 7-byte header)."""
    data = open(path, "rb").read()
    assert data[:4] == b":W&B", data[:7]
    pos, pending = 7, b""
    while pos + 7 <= len(data):
        left = BLOCK - pos % BLOCK
        if left < 7:
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            yield pending + chunk
            pending = b""
        elif kind in (2, 3):
            pending += chunk
        else:
            break


out = {"name": None, "project": None, "tags": [], "config": {}, "summary": {}}
for raw in records(sys.argv[1]):
    r = pb.Record()
    r.ParseFromString(raw)
    kind = r.WhichOneof("record_type")
    if kind == "run":
        out["name"], out["project"], out["tags"] = r.run.display_name, r.run.project, list(r.run.tags)
        for item in r.run.config.update:
            out["config"][item.key] = json.loads(item.value_json)
    elif kind == "config":
        for item in r.config.update:
            out["config"][item.key] = json.loads(item.value_json)
    elif kind == "summary":
        for item in r.summary.update:
            out["summary"][item.key or ".".join(item.nested_key)] = json.loads(item.value_json)
print(json.dumps(out))
