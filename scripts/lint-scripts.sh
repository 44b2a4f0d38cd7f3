#!/usr/bin/env bash
# Checks the project's scripts: `ruby -c` on vagrant/Vagrantfile, and
# runs shellcheck on every shell script under scripts/, vagrant/ and .ci/
# (files named *.sh, and files whose first line starts them with bash or sh).
# Installs shellcheck and ruby first, through scripts/setup.sh, when they
# are missing. Exits non-zero on the first check that fails.
#
# Usage: scripts/lint-scripts.sh
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh shellcheck ruby

ruby -c vagrant/Vagrantfile

shebang='^#!(/usr/bin/env[[:space:]]+|/bin/|/usr/bin/)(ba)?sh([[:space:]]|$)'
scripts=()
while IFS= read -r -d '' file; do
    first=""
    IFS= read -r first < "$file" || true
    if [[ $file == *.sh || $first =~ $shebang ]]; then
        scripts+=("$file")
    fi
done < <(find scripts vagrant .ci -type f -print0 | sort -z)

shellcheck "${scripts[@]}"
echo "lint-scripts.sh: shellcheck found nothing in ${#scripts[@]} scripts: ${scripts[*]}"
