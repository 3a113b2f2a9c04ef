#!/usr/bin/env bash
# Inside a QEMU guest of scripts/rdma-vm-test (root, root filesystem read-only, OUT writable):
# make a Soft-RoCE device and run what MODE says with PYTHON (a venv with the project).
# Usage: in_vm.sh SRC OUT MODE PYTHON [PYTEST ARGS...] (these replace the tests' selection).
#   tests  the RDMA tests, one rxe device on a veth (both ends of every test on it)
#   bench  scripts/bench_sync.py over TCP and RDMA instead
#   host1  one of two VMs joined by a QEMU socket link: rxe on that NIC (10.77.0.1), and a
#          node serving OUT/history over it until host 2 says it is done
#   host2  the other (10.77.0.2): tests/rdma/test_two_hosts.py, a node there syncing from
#          host 1, the link cut mid-sync
# Writes OUT/guest-started (host1, host2: .HOST after it) first, then OUT/result (host1:
# OUT/result.host1): the exit code.
set -u
src=$1
out=$2
what=$3
python=$4
shift 4
selection=("$@")
# First of all: the guest has started (scripts/vm_boot.py boots a VM again only when it did not).
case $what in host1 | host2) date >"$out/guest-started.$what" ;; *) date >"$out/guest-started" ;; esac
[ ${#selection[@]} -gt 0 ] ||
    selection=(-k rdma tests/p2p/transport/test_channel_contract.py tests/rdma)
cd "$src"
result=$out/result
[ "$what" = host1 ] && result=$out/result.host1
echo 1 >"$result"

# The NIC of the two-host link: the one with the MAC scripts/rdma-vm-test gave this host.
link=""
setup=$out/setup.log
if [ "$what" = host1 ] || [ "$what" = host2 ]; then
    n=${what#host}
    setup=$out/setup-$what.log
    for dev in /sys/class/net/*; do
        [ "$(cat "$dev/address")" = "52:54:00:77:00:0$n" ] && link=$(basename "$dev")
    done
fi
{
    set -x
    uname -r
    "$python" -c 'import sys; print(sys.version)'
    "$python" -c 'from p2p.rdma.verbs import load; v = load()
print("pyverbs enums:", v.E.__name__, "CompChannel.fd:", hasattr(v.CompChannel, "fd"))'
    modprobe rdma_rxe
    ip link set lo up
    if [ -n "$link" ]; then
        ip addr add "10.77.0.$n/24" dev "$link"
        ip link set "$link" up
        rdma link add rxe0 type rxe netdev "$link"
    else
        sysctl -w vm.nr_hugepages=64 # so that the huge-page pool is exercised
        ip link add vA type veth peer name vB
        ip addr add 10.77.0.1/24 dev vA
        ip link set vA up
        ip link set vB up
        rdma link add rxe0 type rxe netdev vA
    fi
    rdma link show
    ibv_devinfo -d rxe0 || true
} >"$setup" 2>&1
if [ -n "${n:-}" ] && [ -z "$link" ]; then
    echo "in_vm.sh: no NIC with the MAC of $what" >>"$setup"
    exit 0
fi
export HOME=/tmp PYTHONDONTWRITEBYTECODE=1 BOR_RDMA_REQUIRED=1 BOR_TEST_SLOWDOWN=8
bin=$(dirname "$python")
case $what in
bench)
    timeout 1500 "$python" scripts/bench_sync.py --txs 2000 \
        --txs-per-block 20 --accounts 50 --transport tcp,rdma --modes full --repeat 1 \
        >"$out/bench.log" 2>&1
    echo $? >"$result"
    ;;
host1)
    cp -r "$out/history" /tmp/history
    "$bin/bor-node" run --data-dir /tmp/history --signature-workers 0 --log-format json \
        --rdma required --p2p-listen-endpoint 10.77.0.1:9876 \
        --http-server-address 10.77.0.1:8888 >"$out/host1-node.log" 2>&1 &
    node=$!
    # Host 2 says when it is done through the shared directory; a node that died before is
    # a failure of this host.
    for _ in $(seq 1500); do
        [ -e "$out/host2.done" ] && break
        kill -0 $node 2>/dev/null || break
        sleep 1
    done
    kill -0 $node 2>/dev/null && status=0 || status=1
    kill $node
    wait $node
    echo $status >"$result"
    ;;
host2)
    BOR_TWO_HOSTS_LINK=$link BOR_TWO_HOSTS_HISTORY=$out/history timeout 1200 "$python" \
        -m pytest -p no:cacheprovider -q -rP --basetemp=/tmp/bor-pytest --junitxml="$out/junit.xml" \
        -o junit_family=xunit2 tests/rdma/test_two_hosts.py >"$out/pytest.log" 2>&1
    echo $? >"$result"
    cp "$(ls /tmp/bor-pytest/*/joiner.log | head -n 1)" "$out/host2-node.log"
    touch "$out/host2.done"
    ;;
*)
    # The guest's CPU is emulated: a test gets twice the budget it has on a host. The slowest
    # tests' times are printed, to see what a phase spends its minutes on.
    timeout 1200 "$python" -m pytest -p no:cacheprovider -q --timeout 600 --durations=10 \
        --junitxml="$out/junit.xml" -o junit_family=xunit2 "${selection[@]}" \
        >"$out/pytest.log" 2>&1
    echo $? >"$result"
    ;;
esac
