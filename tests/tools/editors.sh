#!/bin/sh
# tests/tools/editors.sh — `make test-editors`: the editor grammars of editors/ list
# exactly the lexer's keywords and units (grammar/lexer.re is the one lexer), the JSON
# files parse, and, when Vim is installed, the Vim syntax file loads without an error
# and colours a keyword of every group in a plan of plans/.
set -u
fail=0
bad() { echo "test-editors: FAIL: $*"; fail=1; }
tmp=${TMPDIR:-/tmp}/fheplan-editors.$$
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT

# the lexer: every re2c rule "word" { tk = T_...  } is a keyword; the unit table's names
sed -n 's/^ *"\([a-z]*\)" *{ .*tk = T_.*/\1/p' grammar/lexer.re | sort -u >"$tmp/lex-kw"
sed -n 's/^ *{"\([A-Za-z]*\)", RP_UK_.*/\1/p' grammar/lexer.re | sort -u >"$tmp/lex-units"
[ "$(wc -l <"$tmp/lex-kw")" -ge 30 ] || bad "found only $(wc -l <"$tmp/lex-kw") keywords in grammar/lexer.re"
[ "$(wc -l <"$tmp/lex-units")" -eq 9 ] || bad "found $(wc -l <"$tmp/lex-units") units in grammar/lexer.re"

# words of the alternations (a|b|c) or (?:a|b|c) on the lines tagged in the TextMate grammar
tm=editors/vscode/syntaxes/rplan.tmLanguage.json
words_of() { grep -o '(?*:*[A-Za-z_|]*)' | tr -d '()?:' | tr '|' '\n' | grep -v '^$'; }
grep '"comment": "keywords of grammar/lexer.re"' "$tm" | sed 's/.*"match": "//' | words_of |
    sort -u >"$tmp/tm-kw"
grep '"comment": "units of grammar/lexer.re"' "$tm" | sed 's/.*"match": "//' | words_of |
    sort -u >"$tmp/tm-units"
# Vim: the words of the syn keyword lines between the markers; the units' \%(a\|b\) group
vim=editors/vim/syntax/rplan.vim
sed -n '/^" BEGIN lexer keywords/,/^" END lexer keywords/p' "$vim" | grep '^syn keyword' |
    awk '{for (i = 4; i <= NF; i++) print $i}' | sort -u >"$tmp/vim-kw"
sed -n '/^" BEGIN lexer units/,/^" END lexer units/p' "$vim" | grep '^syn match' |
    sed 's/.*\\<\\%(\(.*\)\\)\\>.*/\1/' | sed 's/\\|/\n/g' | sort -u >"$tmp/vim-units"

for f in tm vim; do
    for k in kw units; do
        if ! cmp -s "$tmp/lex-$k" "$tmp/$f-$k"; then
            bad "$f grammar's $k differ from grammar/lexer.re's (< lexer, > $f):"
            diff "$tmp/lex-$k" "$tmp/$f-$k" | grep '^[<>]'
        fi
    done
done

for j in "$tm" editors/vscode/package.json editors/vscode/language-configuration.json; do
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$j" || bad "$j is not JSON"
    fi
done

if command -v vim >/dev/null 2>&1; then
    # load the syntax on the bootstrap plan; every group must colour something
    out=$tmp/vim.txt
    vim -N -u NONE -i NONE -es -c 'set rtp^=editors/vim' -c 'syntax on' -c 'filetype plugin on' \
        -c 'edit plans/ckks-bootstrap.rplan' \
        -c 'let g:seen = {}' \
        -c 'for l in range(1, line("$")) | for c in range(1, col([l, "$"])) | let g:seen[synIDattr(synID(l, c, 1), "name")] = 1 | endfor | endfor' \
        -c "call writefile(sort(keys(g:seen)) + [&filetype, &shiftwidth], '$out')" -c 'qa!' \
        </dev/null >"$tmp/vim.log" 2>&1
    [ -s "$out" ] || bad "vim did not run the syntax file: $(cat "$tmp/vim.log")"
    for g in rplanDeclaration rplanScope rplanPhase rplanAction rplanAttribute rplanLocation \
        rplanData rplanFunction rplanNumber rplanUnit rplanOperator rplanString rplanInterp \
        rplanComment rplan; do
        grep -qx "$g" "$out" 2>/dev/null || bad "vim: no $g in plans/ckks-bootstrap.rplan"
    done
else
    echo "test-editors: vim is not installed: the Vim syntax file is checked by its keywords only"
fi
[ $fail -eq 0 ] && echo "test-editors: ok: $(wc -l <"$tmp/lex-kw") keywords and $(wc -l <"$tmp/lex-units") units in both grammars"
exit $fail
