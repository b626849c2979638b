#!/bin/sh
# Run inside a Debian root where the keel package was just installed
# (tests/package/install_test.sh): what a user gets from `apt install
# ./keel_*.deb`, checked. Prints what it saw; exits non-zero at the first miss.
#   check_installed.sh VERSION
set -eu
version=$1
keel --version
keel --version | grep -qx "keel $version"
keel --version | grep -q "^commit: [0-9a-f]\{7,\}"
test -s /usr/share/man/man1/keel.1.gz
zcat /usr/share/man/man1/keel.1.gz | grep -q "^\.SS launch"
echo "man page: /usr/share/man/man1/keel.1.gz, with each command's flags"
bash -c '. /usr/share/bash-completion/completions/keel; complete -p keel'
bash -c '. /usr/share/bash-completion/completions/keel; COMP_WORDS=(keel lau); COMP_CWORD=1
         _keel; [ "${COMPREPLY[*]}" = launch ]'
bash -c '. /usr/share/bash-completion/completions/keel
         COMP_WORDS=(keel launch --checkpoint_e); COMP_CWORD=2
         _keel; [ "${COMPREPLY[*]}" = --checkpoint_every= ]'
echo "completion: keel lau -> launch, keel launch --checkpoint_e -> --checkpoint_every="
ls /usr/share/doc/keel/examples/linear_learner.flags
ls /usr/share/doc/keel/guide/README.md
cd /tmp
keel datagen --model=linear --rows=4000 --features=200 --nnz=8 --seed=3 --out=/tmp/data
keel launch --servers=1 --workers=1 --flagfile=/usr/share/doc/keel/examples/linear_learner.flags \
  --feature_dim=200 --epochs=2 --train=/tmp/data/train --validation=/tmp/data/validation \
  --model_dir=/tmp/model --minloglevel=1
grep -o '"validation:roc_auc_score": [0-9.]*' /tmp/model/metrics.json
keel predict --model_dir=/tmp/model --data=/tmp/data/test --out=/tmp/predictions.csv
lines=$(wc -l </tmp/predictions.csv)
test "$lines" -gt 100
echo "predictions: $lines lines"
