" fheplan plan files: '#' comments, two-space indentation (the layout of fheplan fmt),
" and :make runs fheplan check on the file.
if exists("b:did_ftplugin")
  finish
endif
let b:did_ftplugin = 1
setlocal commentstring=#\ %s comments=:#
setlocal expandtab shiftwidth=2 softtabstop=2
setlocal makeprg=fheplan\ check\ %
setlocal errorformat=%f:%l:%c:\ %trror:\ %m,%f:%l:%c:\ %tarning:\ %m,%f:%l:%c:\ %tote:\ %m
let b:undo_ftplugin = "setlocal commentstring< comments< expandtab< shiftwidth< softtabstop< makeprg< errorformat<"
