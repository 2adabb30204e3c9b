"""A webhook receiver for Alertmanager on the build machine: records every notification that arrives.

The sandbox's Alertmanager posts to http://10.77.0.1:9199/alerts (inventories/sandbox/group_vars);
the fault stage starts one of these to prove an alert is delivered. Run it alone to watch them:
    python molecule/default/webhook.py   # prints each notification's alerts
"""

import http.server
import json
import threading
import time

ADDRESS = ("10.77.0.1", 9199)


class Receiver:
    """Records (arrival time, payload) of each POST; a context manager running the server in a thread."""

    def __init__(self, address=ADDRESS, echo=False):
        self.received = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    payload = json.loads(body)
                except ValueError:
                    payload = {"unparsed": body.decode("utf-8", "replace")}
                with receiver._lock:
                    receiver.received.append((time.time(), payload))
                if echo:
                    for alert in payload.get("alerts", []):
                        print(alert.get("status"), json.dumps(alert.get("labels"), sort_keys=True), flush=True)
                self.send_response(200)
                self.end_headers()

        self._server = http.server.ThreadingHTTPServer(address, Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def alerts(self, status="firing"):
        """(arrival time, labels, annotations) of every alert received with that status."""
        with self._lock:
            return [(at, a.get("labels", {}), a.get("annotations", {}))
                    for at, payload in self.received for a in payload.get("alerts", [])
                    if a.get("status") == status]  # fmt: skip

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()


if __name__ == "__main__":
    with Receiver(echo=True):
        print("listening on http://%s:%d/alerts" % ADDRESS, flush=True)
        threading.Event().wait()
