#!/usr/bin/env bash
# examples/nginx.sh - run examples/nginx.conf as yourself, not as root:
# nginx gets a prefix of its own in a temporary directory (its pid file,
# logs and temporary files there), and this prints how to use and stop it.
#
#   examples/nginx.sh              # nginx on 127.0.0.1:8000 -> weir :8080, app :3000
#   NGINX_PORT=8001 WEIR_PORT=8090 APP_PORT=3001 examples/nginx.sh
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
nginx=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
[ -x "$nginx" ] || { echo "examples/nginx.sh: nginx is not installed (nginx-light)" >&2; exit 1; }
NGINX_PORT=${NGINX_PORT:-8000}
WEIR_PORT=${WEIR_PORT:-8080}
APP_PORT=${APP_PORT:-3000}

prefix=$(mktemp -d "${TMPDIR:-/tmp}/weir-nginx.XXXXXX")
{
    # as root nginx would hand its workers to "nobody", who cannot write
    # this directory: keep the current user
    if [ "$(id -u)" -eq 0 ]; then
        echo "user $(id -un) $(id -gn);"
    fi
    sed -e "s/server 127.0.0.1:8080;/server 127.0.0.1:$WEIR_PORT;/" \
        -e "s/server 127.0.0.1:3000;/server 127.0.0.1:$APP_PORT;/" \
        -e "s/listen 127.0.0.1:8000;/listen 127.0.0.1:$NGINX_PORT;/" \
        -e "s|^http {|http {\n    access_log $prefix/access.log;\n    client_body_temp_path $prefix/client_body;\n    proxy_temp_path $prefix/proxy;\n    fastcgi_temp_path $prefix/fastcgi;\n    uwsgi_temp_path $prefix/uwsgi;\n    scgi_temp_path $prefix/scgi;|" \
        "$here/nginx.conf"
} >"$prefix/nginx.conf"

"$nginx" -p "$prefix" -e "$prefix/error.log" -c "$prefix/nginx.conf" \
    -g "pid $prefix/nginx.pid; error_log $prefix/error.log;"

cat <<INFO
nginx runs from $prefix, on http://127.0.0.1:$NGINX_PORT/
  weir:  weir serve --rules $here/nginx-rules.yaml --http 127.0.0.1:$WEIR_PORT --check-deny-status 403
  try:   for i in 1 2 3 4 5; do curl -s -o /dev/null -w '%{http_code}\\n' http://127.0.0.1:$NGINX_PORT/; done
  logs:  $prefix/error.log, $prefix/access.log
  stop:  $nginx -p $prefix -c $prefix/nginx.conf -g "pid $prefix/nginx.pid;" -s quit
INFO
