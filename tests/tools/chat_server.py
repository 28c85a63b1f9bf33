"""An OpenAI-style chat-completions server for the prompt enhancer's tests
(tests/cli/enhance_cli.sh).

Listens on 127.0.0.1 at an ephemeral port (written to --port-file once it accepts connections) and
answers every POST with the next answer of a JSON scenario, the last one repeating:

  {"caption_file": "t2v_caption.json",          # optional; "@CAPTION@" in a content is its text
   "answers": [
     {"content": "@CAPTION@"},                  # 200, a chat.completion, finish_reason "stop"
     {"content": null, "reasoning_content": "...", "finish_reason": "length"},
     {"status": 500, "message": "overloaded"},  # an error body {"error": {"message": ...}}
     {"status": 429, "headers": {"Retry-After": "1"}},
     {"delay": 3, "content": "..."},            # waits before answering
     {"body": "<html>not json</html>"}]}        # a raw body

Every request is recorded in --record (a JSON list, rewritten after each request): the arrival
time in seconds since start, the path, the headers (lower-case names) and the body parsed as JSON.
Standard library only; exits by itself after --lifetime seconds so that no test leaves it behind.
"""
import argparse
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--scenario", required=True)
    p.add_argument("--record", required=True)
    p.add_argument("--port-file", required=True)
    p.add_argument("--lifetime", type=float, default=120)
    a = p.parse_args()

    with open(a.scenario, encoding="utf-8") as f:
        scenario = json.load(f)
    answers = scenario["answers"]
    caption = ""
    if "caption_file" in scenario:
        path = os.path.join(os.path.dirname(os.path.abspath(a.scenario)), scenario["caption_file"])
        with open(path, encoding="utf-8") as f:
            caption = f.read().strip()
    t0 = time.monotonic()
    lock = threading.Lock()
    requests = []

    def record(entry):
        with lock:
            requests.append(entry)
            index = len(requests) - 1
            tmp = a.record + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(requests, f, ensure_ascii=False)
            os.replace(tmp, a.record)
        return index

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet: the test reads the record instead
            pass

        def do_POST(self):
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
            index = record({"t": time.monotonic() - t0, "path": self.path,
                            "headers": {k.lower(): v for k, v in self.headers.items()},
                            "body": body})
            ans = answers[min(index, len(answers) - 1)]
            time.sleep(ans.get("delay", 0))
            status = ans.get("status", 200)
            if "body" in ans:
                out = ans["body"]
            elif status == 200:
                content = ans.get("content", "@CAPTION@")
                if isinstance(content, str):
                    content = content.replace("@CAPTION@", caption)
                message = {"role": "assistant", "content": content}
                if "reasoning_content" in ans:
                    message["reasoning_content"] = ans["reasoning_content"]
                out = json.dumps({
                    "id": f"chatcmpl-{index}", "object": "chat.completion", "created": 0,
                    "model": body.get("model") if isinstance(body, dict) else None,
                    "choices": [{"index": 0, "message": message,
                                 "finish_reason": ans.get("finish_reason", "stop")}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
            else:
                out = json.dumps({"error": {"message": ans.get("message", "scripted error"),
                                            "type": "test", "code": status}})
            data = out.encode("utf-8")
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                for k, v in ans.get("headers", {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout under test)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    timer = threading.Timer(a.lifetime, lambda: os._exit(0))
    timer.daemon = True
    timer.start()
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(tmp, a.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
