# Sourced by .ci/consumer.sh and .ci/api.sh, which fetch this repository's
# modules from a file proxy of their own. The versions they publish are not
# tagged (the same version may hold other content in the next run) and no
# checksum tells them apart, so a copy an earlier run left in the module
# cache must not be used: take_modcache locks the cache against another such
# run on this machine and removes the repository's modules from it, and
# again when the script exits. Third-party modules, and what the workspace
# compiled from them, stay. The scripts also run the go command with
# GODEBUG=goindex=0: its index of the module cache (in GOCACHE) is keyed by
# module and version alone, and would describe an earlier run's content.
modcache=$(go env GOMODCACHE)
purge_ours() {
  local d
  for d in "$modcache/github.com/stockguard" "$modcache/cache/download/github.com/stockguard"; do
    if [ -e "$d" ]; then chmod -R u+w "$d" && rm -rf "$d"; fi
  done
}
take_modcache() {
  mkdir -p "$modcache/cache"
  exec 9>"$modcache/cache/stockguard-ci.lock"
  flock 9
  purge_ours
}
