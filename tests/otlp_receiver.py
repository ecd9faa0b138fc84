"""An OTLP/HTTP metrics receiver for the tests: decodes each POST with the official
protobuf definitions (PyPI `opentelemetry-proto`) and appends what it holds, as one JSON
line, to the file given. Prints `listening PORT` once ready."""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2

OUT = sys.argv[1]


def value(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def attrs(key_values):
    return {kv.key: value(kv.value) for kv in key_values}


def metric(m):
    kind = m.WhichOneof("data")
    out = {"name": m.name, "unit": m.unit, "description": m.description, "kind": kind}
    data = getattr(m, kind)
    out["temporality"] = data.aggregation_temporality
    if kind == "histogram":
        out["points"] = [
            {
                "attrs": attrs(p.attributes),
                "count": p.count,
                "sum": p.sum,
                "buckets": list(p.bucket_counts),
                "bounds": list(p.explicit_bounds),
                "min": p.min,
                "max": p.max,
            }
            for p in data.data_points
        ]
    elif kind == "sum":
        out["monotonic"] = data.is_monotonic
        out["points"] = [
            {"attrs": attrs(p.attributes), "value": getattr(p, p.WhichOneof("value"))}
            for p in data.data_points
        ]
    else:
        out["raw"] = MessageToDict(data)
    return out


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        request = metrics_service_pb2.ExportMetricsServiceRequest()
        request.ParseFromString(body)
        line = {
            "path": self.path,
            "content_type": self.headers.get("Content-Type"),
            "resources": [
                {
                    "attributes": attrs(rm.resource.attributes),
                    "scopes": [
                        {"name": sm.scope.name, "metrics": [metric(m) for m in sm.metrics]}
                        for sm in rm.scope_metrics
                    ],
                }
                for rm in request.resource_metrics
            ],
        }
        with open(OUT, "a") as f:
            f.write(json.dumps(line) + "\n")
        reply = metrics_service_pb2.ExportMetricsServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"listening {server.server_address[1]}", flush=True)
server.serve_forever()
