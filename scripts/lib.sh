# Shell helpers the scripts in this folder share (sourced, not run).

# A TCP port on 127.0.0.1 that nothing listens on, from the dynamic range (bash only).
free_port() {
    local port tries=200
    while [ "$tries" -gt 0 ]; do
        port=$((20000 + RANDOM % 40000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "$port"; return 0; fi
        tries=$((tries - 1))
    done
    return 1
}
