"""exec.py BASE PID [fork]: waits (bounded) until the boxer serve at BASE is
ready, then checks that POST /v1/exec answers print(2+2) with 4 and that
seed 004's `python -m pytest` passes through POST /v1/run-python. PID is the
server's process, whose death ends the wait at once (0: not watched). With
fork, it also forks a session (the capability it needs beyond running:
writing the fork's memory) and checks the fork holds its parent's state.
BOXER_KEY in the environment: the API key it sends (Authorization: Bearer)."""
import json, os, sys, time, urllib.request


def post(path, body):
    headers = {"Content-Type": "application/json"}
    if os.environ.get("BOXER_KEY"):
        headers["Authorization"] = "Bearer " + os.environ["BOXER_KEY"]
    req = urllib.request.Request(base + path, method="POST", data=json.dumps(body).encode(), headers=headers)
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.load(r)


base, pid = sys.argv[1], int(sys.argv[2])
# The warm pool imports numpy and pandas first, which takes a while under TCG.
deadline = time.monotonic() + 300
while True:
    if pid:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            sys.exit("boxer serve exited before it was ready")
    try:
        with urllib.request.urlopen(base + "/readyz", timeout=5) as r:
            if r.status == 200:
                break
    except OSError:
        pass
    if time.monotonic() > deadline:
        sys.exit("/readyz not 200 within 300 s")
    time.sleep(0.2)
body = post("/v1/exec", {"code": "print(2+2)", "language": "python"})
print(json.dumps(body))
if body.get("result", {}).get("stdout") != "4\n":
    sys.exit("stdout is not 4\\n")
# Seed 004's test run, which the pool sends to pytest's own lane (a zygote
# that learned pytest's first use).
body = post("/v1/run-python", {"files": {"utils.py": "def add(a, b):\n    return a + b\n",
                                         "test_math.py": "from utils import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"},
                               "command": ["python", "-m", "pytest", "-q", "test_math.py"]})
print(json.dumps(body))
if body.get("exit_code") != 0 or "1 passed" not in body.get("stdout", ""):
    sys.exit("python -m pytest did not pass")
if sys.argv[3:] == ["fork"]:
    parent = post("/v1/sessions", {})["session_id"]
    post(f"/v1/sessions/{parent}/exec", {"code": "x = 41"})
    child = post(f"/v1/sessions/{parent}/fork", {})["session_id"]
    out = post(f"/v1/sessions/{child}/exec", {"code": "print(x + 1)"})
    print(json.dumps(out))
    if out.get("result", {}).get("stdout") != "42\n":
        sys.exit("the fork does not hold x = 41")
