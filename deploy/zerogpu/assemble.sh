#!/usr/bin/env bash
# deploy/zerogpu/assemble.sh OUT_DIR: a folder ready to push to a ZeroGPU Space that serves the model backend.
#
# It holds what the backend imports and reads (core/, models/, analysis/, services/, data/, pyproject.toml for the
# version, app/__init__.py and app/backend.py) and this folder's app.py, requirements.txt and README.md (the Space's
# header). No tests, benches, docs, pages or environments. Files come from this working tree (git's tracked and
# untracked-but-not-ignored files), so the Space runs what a front end started from here runs.
#
# OUT_DIR may be missing, empty, a fresh clone of the Space (only .git, .gitattributes, README.md) or an earlier
# assembly (it holds .bfe-space): that one is cleared first, its .git and .gitattributes kept. Anything else is
# refused, so a mistyped path never loses files. Then push it (see docs/deploy.md):
#   hf upload <user>/<space> OUT_DIR . --repo-type space     # or: cd OUT_DIR && git add -A && git commit && git push
set -euo pipefail

if [ "$#" -ne 1 ] || [ -z "$1" ]; then
    echo "usage: $0 OUT_DIR" >&2
    exit 2
fi
HERE=$(cd "$(dirname "$0")" && pwd -P)
ROOT=$(cd "$HERE/../.." && pwd -P)
if [ -d "$1" ]; then
    OUT=$(cd "$1" && pwd -P)
elif [ -d "$(dirname "$1")" ]; then
    OUT="$(cd "$(dirname "$1")" && pwd -P)/$(basename "$1")"
else
    echo "OUT_DIR's parent folder ($(dirname "$1")) does not exist." >&2
    exit 2
fi
case "$OUT/" in "$ROOT/"*) echo "OUT_DIR is inside the repository ($OUT): pick a folder outside it." >&2; exit 2 ;; esac
case "$ROOT/" in "$OUT/"*) echo "OUT_DIR holds the repository ($OUT): pick a folder outside it." >&2; exit 2 ;; esac

shopt -s dotglob nullglob
mkdir -p "$OUT"
if [ ! -f "$OUT/.bfe-space" ]; then
    for entry in "$OUT"/*; do
        case "${entry##*/}" in
            .git | .gitattributes | README.md) ;;
            *) echo "OUT_DIR ($OUT) holds files that are not an earlier assembly (${entry##*/}): use an empty folder or a fresh clone of the Space." >&2
               exit 2 ;;
        esac
    done
fi
for entry in "$OUT"/*; do
    case "${entry##*/}" in .git | .gitattributes) ;; *) rm -rf -- "$entry" ;; esac
done

PATHS=(pyproject.toml app/__init__.py app/backend.py core models analysis services data)
if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git -C "$ROOT" ls-files -z --cached --others --exclude-standard -- "${PATHS[@]}" |
        while IFS= read -r -d '' file; do
            if [ -f "$ROOT/$file" ]; then printf '%s\0' "$file"; fi  # a file deleted but not yet committed stays out
        done | tar -C "$ROOT" --null -T - -cf - | tar -C "$OUT" -xf -
else  # a copy without git history (an unpacked archive)
    tar -C "$ROOT" --exclude=__pycache__ --exclude='*.py[cod]' -cf - "${PATHS[@]}" | tar -C "$OUT" -xf -
fi
cp "$HERE/app.py" "$HERE/requirements.txt" "$HERE/README.md" "$OUT/"

# The Hub refuses binary files outside LFS/Xet in a git push (data/ holds a few .gz files and the shipped DistilBERT
# teacher's safetensors); `hf upload` needs nothing.
for rule in '*.gz filter=lfs diff=lfs merge=lfs -text' '*.safetensors filter=lfs diff=lfs merge=lfs -text'; do
    if ! grep -qxF "$rule" "$OUT/.gitattributes" 2>/dev/null; then
        printf '%s\n' "$rule" >>"$OUT/.gitattributes"
    fi
done
commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git -C "$ROOT" status --porcelain -- "${PATHS[@]}" 2>/dev/null | head -c1)
printf 'Assembled by deploy/zerogpu/assemble.sh from commit %s%s.\n' "$commit" "${dirty:+ (with uncommitted changes)}" >"$OUT/.bfe-space"
echo "model backend Space assembled in $OUT ($(find "$OUT" -path "$OUT/.git" -prune -o -type f -print | wc -l | tr -d ' ') files, commit $commit)"
