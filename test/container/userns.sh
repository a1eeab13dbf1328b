#!/usr/bin/env bash
# Builds boxer's container image (deploy/image/build.sh) and runs it as
# Kubernetes runs it with hostUsers: false: in a user namespace of its own
# (0-65535 mapped to 200000-265535), on cgroup v2, with the privileges
# test/container/run.sh gives it. This host may be cgroup v1, where a user
# namespace's root cannot own cgroups, so the run happens in qemu guests on
# Debian's cloud kernels: test/guest's container-userns case (its comment
# in test/guest/suite.sh says what it checks and what the rig stands in
# for). Needs root.
#
#   test/container/userns.sh [--kernels 6.1,6.12] [--verbose] [--keep]
set -euo pipefail
cd "$(dirname "$0")/../.."
./deploy/image/build.sh
exec ./test/guest/run.sh --kernels 6.1,6.12 --suite quick --cases '^container-userns$' "$@"
