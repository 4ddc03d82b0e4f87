#!/usr/bin/env bash
# Seed 2 (the DDTree launch on the B300 box), reproduced: from the operator's machine, every 15 s, `systemctl is-active`
# over a fresh ssh (`failed` ends the loop), then a chat completion (temperature 0, max_tokens 4) with curl
# --max-time 8, ready when the body contains "content"; the journal's last line every 8th round. 80 rounds (1200 s).
# The server is keyed (the role refuses 0.0.0.0 without a key): the curl sends API_KEY, as the seed's would have.
# usage: seed2_chat_loop.sh HOST PORT UNIT SSH_KEY MODEL API_KEY
HOST=$1 PORT=$2 UNIT=$3 KEY=$4 MODEL=$5 API_KEY=$6
SSH=(ssh -i "$KEY" -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o ConnectTimeout=10 "root@$HOST")
for i in $(seq 1 80); do
    sleep 15
    st=$(timeout 20 "${SSH[@]}" "systemctl is-active $UNIT" 2>&1)
    if [ "$st" = "failed" ]; then
        echo "[$((i*15))s] FAILED"
        timeout 20 "${SSH[@]}" "journalctl -u $UNIT --no-pager -n 30 | grep -iE 'error|assert|traceback|fatal|sm_|arch' | tail -12" 2>&1
        break
    fi
    resp=$(curl -s --max-time 8 "http://$HOST:$PORT/v1/chat/completions" -H "Content-Type: application/json" -H "Authorization: Bearer $API_KEY" \
        -d '{"model":"'"$MODEL"'","messages":[{"role":"user","content":"Say OK"}],"temperature":0,"max_tokens":4}' 2>/dev/null)
    if echo "$resp" | grep -q '"content"'; then echo "[$((i*15))s] READY"; break; fi
    if [ $((i % 8)) -eq 0 ]; then
        timeout 20 "${SSH[@]}" "journalctl -u $UNIT --no-pager -n 2 | tail -1" 2>&1 | head -c 160; echo "  [$((i*15))s]"
    fi
done
