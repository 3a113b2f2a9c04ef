#!/usr/bin/env bash
# Inside the QEMU guest (root, host filesystem read-only, $2 writable): make a Soft-RoCE
# device and run the RDMA tests with the project's RDMA venv. Writes $2/result.
# With a third argument "bench", runs scripts/bench_sync.py over TCP and RDMA instead.
set -u
src=$1
out=$2
what=${3:-tests}
cd "$src"
{
    set -x
    modprobe rdma_rxe
    sysctl -w vm.nr_hugepages=64  # so that the huge-page pool is exercised
    ip link set lo up
    ip link add vA type veth peer name vB
    ip addr add 10.77.0.1/24 dev vA
    ip link set vA up
    ip link set vB up
    rdma link add rxe0 type rxe netdev vA
    rdma link show
    ibv_devinfo -d rxe0 || true
} >"$out/setup.log" 2>&1
export HOME=/tmp PYTHONDONTWRITEBYTECODE=1 BOR_RDMA_REQUIRED=1 BOR_TEST_SLOWDOWN=8
if [ "$what" = bench ]; then
    timeout 1500 "$src/.venv-rdma/bin/python" scripts/bench_sync.py --txs 2000 \
        --txs-per-block 20 --accounts 50 --transport tcp,rdma --modes full \
        >"$out/bench.log" 2>&1
    echo $? >"$out/result"
    exit 0
fi
timeout 1200 "$src/.venv-rdma/bin/python" -m pytest -p no:cacheprovider -q \
    --junitxml="$out/junit.xml" -o junit_family=xunit2 \
    -k "rdma or not (memory or tcp)" tests/p2p/test_channel_contract.py tests/rdma \
    >"$out/pytest.log" 2>&1
echo $? >"$out/result"
