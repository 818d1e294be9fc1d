# The HTTPS server of testenv.TLSUpstream: it answers every request with
# 200 and a JSON object describing it, and appends the same object, one a
# line, to /srv/requests.jsonl. That file appears once the server listens.
import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG = "/srv/requests.jsonl"
lock = threading.Lock()

tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
tls.load_cert_chain("/srv/cert.pem", "/srv/key.pem")


def remember_sni(sock, name, _ctx):
    sock.sni = name or ""


tls.sni_callback = remember_sni


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        # The handshake in the connection's thread: a client that never
        # starts one holds up only itself.
        self.request.settimeout(30)
        self.request = tls.wrap_socket(self.request, server_side=True)
        super().setup()

    def body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def answer(self):
        path, _, query = self.path.partition("?")
        record = {
            "method": self.command,
            "path": path,
            "query": query,
            "headers": [[k, v] for k, v in self.headers.items()],
            "body": self.body().decode("utf-8", "replace"),
            "sni": getattr(self.request, "sni", ""),
            "remote": self.client_address[0],
        }
        line = json.dumps(record)
        with lock, open(LOG, "a") as f:
            f.write(line + "\n")
        out = (line + "\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(out)


for method in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"):
    setattr(Handler, "do_" + method, Handler.answer)

server = ThreadingHTTPServer(("", 443), Handler)
open(LOG, "a").close()
print("listening", flush=True)
server.serve_forever()
