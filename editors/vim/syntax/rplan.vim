" Vim syntax file for the .rplan plan language of fheplan (rplan(5)).
" Install: copy editors/vim/ into ~/.vim (or add it to 'runtimepath'). The keyword and
" unit lists below are the lexer's (grammar/lexer.re); tests/tools/editors.sh keeps them
" equal.
if exists("b:current_syntax")
  finish
endif
syn case match
syn iskeyword @,48-57,_

" BEGIN lexer keywords
syn keyword rplanDeclaration rplan budget const value policy
syn keyword rplanScope stage plan request using for in
syn keyword rplanPhase reclaim reserve enter body exit
syn keyword rplanAction require ensure move drop discard hold release run from at level
syn keyword rplanAttribute init source priority exclusive replicable seeded keep fields limbs
syn keyword rplanDeclaration kernel
syn keyword rplanLocation host pinned
syn keyword rplanData synth file zero
" END lexer keywords

syn keyword rplanPredefined rank world_size
syn match rplanFunction "\<\%(ciphertext\|plaintext\|switching_key\|keyswitch_workspace\|rotation_workspace\|mult_workspace\|rescale_workspace\|min\|max\|tiered_lru\|lookahead\)\ze\s*("
syn match rplanLocation "\<[a-z]\+:[0-9]\+\>"
syn match rplanNumber "\<0[xX][0-9a-fA-F][0-9a-fA-F_]*\>"
syn match rplanNumber "\<[0-9][0-9_]*\>"
" BEGIN lexer units
syn match rplanUnit "\%(\%([0-9_]\|)\)\s*\)\@<=\<\%(B\|KiB\|MiB\|GiB\|TiB\|ns\|us\|ms\|s\)\>"
" END lexer units
syn match rplanOperator "->\|\.\.<\|\.\.\|<<\|[-+*/%@=]"
syn match rplanInterp "{[A-Za-z_][A-Za-z0-9_]*}" contained
syn region rplanString start=+"+ end=+"+ end=+$+ oneline contains=rplanInterp
syn match rplanComment "#.*$" contains=rplanTodo,@Spell
syn keyword rplanTodo TODO FIXME XXX contained

hi def link rplanDeclaration Statement
hi def link rplanScope Structure
hi def link rplanPhase Label
hi def link rplanAction Keyword
hi def link rplanAttribute StorageClass
hi def link rplanLocation Constant
hi def link rplanData Function
hi def link rplanPredefined Constant
hi def link rplanFunction Function
hi def link rplanNumber Number
hi def link rplanUnit Type
hi def link rplanOperator Operator
hi def link rplanString String
hi def link rplanInterp Special
hi def link rplanComment Comment
hi def link rplanTodo Todo

let b:current_syntax = "rplan"
