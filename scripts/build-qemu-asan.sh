#!/usr/bin/env bash
# A qemu-system-x86_64 whose device code (hw/pvrdma) is built with
# AddressSanitizer and UBSan: the objects of the normal build
# (scripts/build-qemu.sh) for the rest of QEMU, hw/pvrdma compiled again
# with -fsanitize=address,undefined, linked with the sanitizer runtimes.
# ASan intercepts every malloc/free of the process and checks every access
# the device code makes (heap, stack, globals, use after free); UBSan
# every undefined operation in it. The rest of QEMU is not instrumented
# (a whole sanitized QEMU would be a second full build; what is ours to
# check is the device). Cached under $PVRDMA_CACHE/qemu/asan-KEY, keyed
# by the normal build and the device's sources. Prints the binary's path;
# tests run it through PVRDMA_QEMU (scripts/vm.sh) with ASAN_OPTIONS and
# UBSAN_OPTIONS from scripts/asan-env.sh.
. "$(dirname "$0")/lib.sh"

normal=$("$PVRDMA_TOP/scripts/build-qemu.sh")
bld=$(dirname "$(readlink -f "$normal")")
[ -e "$bld/build.ninja" ] || die "no QEMU build directory at $bld"
key=$(hash_inputs "$PVRDMA_TOP/hw/pvrdma" "$PVRDMA_TOP/include" \
      "$PVRDMA_TOP/scripts/build-qemu-asan.sh" "$bld/build.ninja")
out=$PVRDMA_CACHE/qemu/asan-$key
if [ ! -x "$out/qemu-system-x86_64" ]; then
    log "building the device with ASan+UBSan into $out"
    rm -rf "$out" "$out.tmp" && mkdir -p "$out.tmp/obj"
    # Compile commands of hw/pvrdma (those ninja used), output redirected,
    # sanitizers added; the link line of qemu-system-x86_64 with those
    # objects in place of the plain ones.
    python3 - "$bld" "$out.tmp" <<'PY' || die "cannot derive the sanitized build from $bld"
import json, os, re, shlex, subprocess, sys
bld, out = sys.argv[1], sys.argv[2]
san = ['-fsanitize=address,undefined', '-fno-omit-frame-pointer',
       '-fno-sanitize-recover=undefined']
objs = {}
for c in json.load(open(os.path.join(bld, 'compile_commands.json'))):
    if '/hw/pvrdma/' not in c['file'] or not c['output'].endswith('.o'):
        continue
    argv = shlex.split(c['command'])
    new, skip = [], 0
    for i, a in enumerate(argv):
        if skip:
            skip -= 1
            continue
        if a in ('-MD',):
            continue
        if a in ('-MQ', '-MF'):
            skip = 1
            continue
        if a == '-o':
            dst = os.path.join(out, 'obj', os.path.basename(argv[i + 1]))
            new += ['-o', dst]
            objs[argv[i + 1]] = dst
            skip = 1
            continue
        new.append(a)
    subprocess.run(new + san, cwd=bld, check=True)
if not objs:
    sys.exit('no hw/pvrdma objects in compile_commands.json')
# The link statement of the binary: its inputs and LINK_ARGS.
text = open(os.path.join(bld, 'build.ninja')).read().replace('$\n', '')
m = re.search(r'^build qemu-system-x86_64: (\S+) (.*?)(?: \| .*)?\n((?: .*\n)*)',
              text, re.M)
if not m:
    sys.exit('no link statement for qemu-system-x86_64')
ins = m.group(2).split(' | ')[0].split()
link_args = ''
for line in m.group(3).splitlines():
    k, _, v = line.strip().partition(' = ')
    if k == 'LINK_ARGS':
        link_args = v
missing = [o for o in objs if o not in ins]
if missing:
    sys.exit('objects not linked: %s' % missing)
ins = [objs.get(i, i) for i in ins]
rsp = os.path.join(out, 'link.rsp')
with open(rsp, 'w') as f:
    f.write(' '.join(ins) + ' ' + link_args)
subprocess.run(['cc', '-m64', '-o', os.path.join(out, 'qemu-system-x86_64'),
                '@' + rsp] + san, cwd=bld, check=True)
PY
    mv "$out.tmp" "$out"
fi
echo "$out/qemu-system-x86_64"
