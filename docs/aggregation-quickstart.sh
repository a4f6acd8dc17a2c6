#!/usr/bin/env bash
# The quick start of docs/AGGREGATION.md, run as written by CI
# (cmd/privrec TestDapQuickstart): two aggregators, a method's tasks built
# from its public plan, four devices, collection, and a device's own
# recommendations. Run it in an empty directory with privrec on the PATH.
set -euo pipefail
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT

# 1. Secrets, and the two aggregators: each its own database (made once,
#    with --create), key and port. --min-batch 3: this demo's helper
#    releases aggregates of 3 or more reports (default 100).
head -c 32 /dev/urandom | base64 > secret        # shared by both aggregators
head -c 32 /dev/urandom | base64 > peer.token    # the leader's credential at the helper
head -c 32 /dev/urandom | base64 > admin.token   # the leader's admin
privrec serve --role helper --create --db helper.db --key-file helper.key --secret-file secret \
    --peer-token-file peer.token --min-batch 3 --listen 127.0.0.1:0 --addr-file helper.addr --log-level warn &
until [ -s helper.addr ]; do sleep 0.1; done
HELPER=http://$(cat helper.addr)
privrec serve --role leader --create --db leader.db --key-file leader.key --secret-file secret \
    --peer-token-file peer.token --admin-token-file admin.token --helper "$HELPER" \
    --budget-rho 10 --listen 127.0.0.1:0 --addr-file leader.addr --log-level warn &
until [ -s leader.addr ]; do sleep 0.1; done
LEADER=http://$(cat leader.addr)

# 2. The collection's declared facts (catalogue, scale, ε, δ, the devices
#    it is planned for) and dp-popularity's first task, built from its plan.
printf '%s\n' heat alien fargo brazil clue vertigo > items.txt
TASK_FLAGS=(--leader "$LEADER" --admin-token-file admin.token --method dp-popularity --name pop
            --items items.txt --scale 1:5 --epsilon 1 --delta 1e-6 --devices 4)
privrec dap task create "${TASK_FLAGS[@]}"

# 3. Four devices, each with her own ratings (item, rating): she enrols,
#    then her device computes, shards, seals and uploads her contribution.
printf 'heat\t5\nalien\t4\nfargo\t5\n' > u1.tsv
printf 'heat\t4\nalien\t5\nclue\t2\n'  > u2.tsv
printf 'alien\t5\nfargo\t4\n'          > u3.tsv
printf 'heat\t3\nalien\t4\nbrazil\t5\n' > u4.tsv
for u in 1 2 3 4; do
  privrec dap enrol --leader "$LEADER" --token-file u$u.token
  privrec dap contribute --leader "$LEADER" --helper "$HELPER" --token-file u$u.token \
      --task pop-1-counts --ratings u$u.tsv --ledger u$u.ledger --budget-rho 10
done

# 4. The admin collects the task; the same task create publishes the
#    model once every task is released.
privrec dap collect --leader "$LEADER" --admin-token-file admin.token --task pop-1-counts
privrec dap task create "${TASK_FLAGS[@]}"

# 5. A device builds the model from the releases and ranks for herself
#    (nothing is sent).
privrec dap recommend --leader "$LEADER" --model pop --ratings u3.tsv --k 3
