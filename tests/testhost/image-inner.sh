#!/bin/sh
# Inside the test host (real KVM): jobs on an imported image (image.test).
#   image-inner.sh BUILDDIR STORE
B=$1 D=$2
HUSK=$B/husk
W=/tmp/image-inner
mkdir -p $W
. "$(dirname "$0")/lib.sh"
I="--image demo --image-dir $D"

run "no command: the image's Entrypoint + Cmd" 0 run $I --console $W/console
has "Cmd ran" $W/out '^from-cmd$'
has "in its WorkingDir" $W/out '^/app$'
has "with its Env" $W/out '^IMG_VAR=from-image$'
has "reading the image's files" $W/out '^image data$'
has "as agentuser, not the image's User" $W/out '^1000$'

run "--env overrides the image's Env" 0 run $I --env IMG_VAR=mine --console $W/console
has "overridden" $W/out '^IMG_VAR=mine$'

run "a command replaces Entrypoint and Cmd" 0 run $I --console $W/console -- /bin/sh -c 'echo given; pwd'
has "the given command ran" $W/out '^given$'
has "still in the WorkingDir" $W/out '^/app$'

run "--cwd overrides WorkingDir" 0 run $I --cwd /tmp/workspace --console $W/console -- pwd
has "in the workspace" $W/out '^/tmp/workspace$'

run "owners from the image hold: 1234:55 0640 is unreadable to agentuser" 1 run $I \
	--console $W/console -- cat /etc/hello
has "permission denied" $W/err 'Permission denied'

run "the root is read-only" 0 run $I --console $W/console -- \
	/bin/sh -c '{ echo x >/app/new; } 2>&1; echo status=$?'
has "write to /app refused" $W/out 'Read-only file system'

# a/ is 7:8 0750 in the image: agentuser cannot look (import.test reads it).
run "an opaque directory in the guest" 0 run $I --console $W/console -- ls /d
has "d/new in the guest" $W/out '^new$'
hasnt "d/old not in the guest" $W/out '^old$'

run "an unknown image: 125 with the reason" 125 run --image nosuch --image-dir $D -- true
has "reason" $W/err "no image 'nosuch'"

summary image
