"""exec.py BASE PID: waits (bounded) until the boxer serve at BASE is ready,
then checks that POST /v1/exec answers print(2+2) with 4. PID is the
server's process, whose death ends the wait at once (0: not watched)."""
import json, os, sys, time, urllib.request

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
req = urllib.request.Request(base + "/v1/exec", method="POST",
    data=json.dumps({"code": "print(2+2)", "language": "python"}).encode(),
    headers={"Content-Type": "application/json"})
with urllib.request.urlopen(req, timeout=120) as r:
    body = json.load(r)
print(json.dumps(body))
if body.get("result", {}).get("stdout") != "4\n":
    sys.exit("stdout is not 4\\n")
