#!/usr/bin/env bash
# Seed 1 (the K2.6 launch on the PCIe box), reproduced: from the operator's machine, every 10 s, `systemctl is-active`
# over a fresh ssh and `curl .../v1/models | grep -c '"id"'`; GPU memory over ssh every 6th round. 60 rounds (600 s).
# Only host, port, unit and ssh key are arguments. The seed's health line is kept as it was: while curl fails it
# yields "0<newline>0" and `[` complains (the seed's "integer expression expected" noise) but still means not ready.
# The server is keyed (the role refuses 0.0.0.0 without a key): the curl sends API_KEY, as the seed's would have.
# usage: seed1_models_loop.sh HOST PORT UNIT SSH_KEY API_KEY
HOST=$1 PORT=$2 UNIT=$3 KEY=$4 API_KEY=$5
SSH=(ssh -i "$KEY" -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o ConnectTimeout=5 "root@$HOST")
for i in $(seq 1 60); do
    sleep 10
    st=$("${SSH[@]}" "systemctl is-active $UNIT" 2>&1)
    if [ "$st" = "failed" ]; then
        echo "[$((i*10))s] FAILED"
        "${SSH[@]}" "journalctl -u $UNIT --no-pager -n 20" 2>&1 | tail -5
        break
    fi
    health=$(curl -s --connect-timeout 3 -H "Authorization: Bearer $API_KEY" "http://$HOST:$PORT/v1/models" 2>/dev/null | grep -c '"id"' || echo 0)
    if [ "$health" -gt 0 ] 2>/dev/null; then
        echo "[$((i*10))s] READY"
        break
    fi
    if [ $((i % 6)) -eq 0 ]; then
        "${SSH[@]}" "nvidia-smi --query-gpu=memory.used --format=csv,noheader" 2>&1 | head -8 | tr '\n' ' '
        echo "  [$((i*10))s] st=$st"
    fi
done
