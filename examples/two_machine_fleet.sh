#!/usr/bin/env bash
# A two-machine fleet with TLS and a bearer token, shown on loopback.
#
#     bash examples/two_machine_fleet.sh
#     MODEL=DIR ITERATIONS=2 POPULATION=4 OUT=runs/fleet-example bash examples/two_machine_fleet.sh
#
# On real machines the three steps run in three places:
#   1. once, anywhere safe: make a CA, one certificate per server box (its SAN must name the address
#      the optimizer dials: set BOX1_HOST/BOX2_HOST), and a token; copy box N's .pem/.key and the token
#      to box N, and ca.pem and the token to the optimizer's box. Keep ca.key off the servers.
#   2. on each server box: `seedcast serve --host 0.0.0.0 --port 50051 --tls-cert ... --tls-key ...
#      --token-file token` (TLS makes a non-loopback address allowed; the token guards every call that
#      changes anything). Add `--tls-ca clients-ca.pem` to also require client certificates (mutual TLS;
#      then set fleet.tls_cert and fleet.tls_key on the optimizer).
#   3. on the optimizer's box: `seedcast train --servers box1:50051,box2:50051 fleet.tls_ca=ca.pem
#      fleet.token_file=token`.
# Here both "boxes" are this machine: two servers on 127.0.0.1, free ports, and the run against them.
set -euo pipefail

MODEL=${MODEL:-smollm2-135m-instruct}
ITERATIONS=${ITERATIONS:-3}
POPULATION=${POPULATION:-8}
OUT=${OUT:-runs/two-machine-example}
BOX1_HOST=${BOX1_HOST:-127.0.0.1}
BOX2_HOST=${BOX2_HOST:-127.0.0.1}
SEEDCAST=${SEEDCAST:-seedcast}

mkdir -p "$OUT/pki"
PKI="$OUT/pki"
servers=()
cleanup() { for pid in "${servers[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

# --- 1. The CA, one certificate per server, the token ------------------------------------------------
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
    -subj /CN=seedcast-example-ca -keyout "$PKI/ca.key" -out "$PKI/ca.pem" 2>/dev/null
san_of() { [[ $1 =~ ^[0-9.]+$ ]] && echo "IP:$1" || echo "DNS:$1"; }
for box in box1 box2; do
    host_var="${box^^}_HOST"
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$box" \
        -keyout "$PKI/$box.key" -out "$PKI/$box.csr" 2>/dev/null
    printf 'subjectAltName=%s\n' "$(san_of "${!host_var}")" > "$PKI/$box.ext"
    openssl x509 -req -in "$PKI/$box.csr" -CA "$PKI/ca.pem" -CAkey "$PKI/ca.key" -CAcreateserial \
        -days 30 -extfile "$PKI/$box.ext" -out "$PKI/$box.pem" 2>/dev/null
done
(umask 077 && openssl rand -hex 32 > "$PKI/token")
echo "certificates and token in $PKI"

# --- 2. One server per box, TLS and the token (a free port each; the ready file says which) ----------
addresses=()
for box in box1 box2; do
    host_var="${box^^}_HOST"
    rm -f "$OUT/$box.ready"
    "$SEEDCAST" serve --model "$MODEL" --host "${!host_var}" --port 0 --threads 1 \
        --tls-cert "$PKI/$box.pem" --tls-key "$PKI/$box.key" --token-file "$PKI/token" \
        --ready-file "$OUT/$box.ready" > "$OUT/$box.log" 2>&1 &
    servers+=($!)
done
for box in box1 box2; do
    host_var="${box^^}_HOST"
    for _ in $(seq 600); do [[ -s $OUT/$box.ready ]] && break; sleep 0.5; done
    [[ -s $OUT/$box.ready ]] || { echo "$box did not start; see $OUT/$box.log" >&2; tail -20 "$OUT/$box.log" >&2; exit 1; }
    port=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["port"])' "$OUT/$box.ready")
    addresses+=("${!host_var}:$port")
    echo "$box serving TLS at ${!host_var}:$port"
done

# --- 3. The run, from the optimizer's box -------------------------------------------------------------
fleet=$(IFS=,; echo "${addresses[*]}")
"$SEEDCAST" train --servers "$fleet" --run-dir "$OUT/run" --no-progress \
    model.name="$MODEL" iterations="$ITERATIONS" es.population="$POPULATION" batch_size=8 eval_every=0 \
    fleet.tls_ca="$PKI/ca.pem" fleet.token_file="$PKI/token"
echo "trained $ITERATIONS iterations on $fleet over TLS with a token; run in $OUT/run"
