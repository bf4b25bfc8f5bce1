" .rplan files are fheplan plan files (rplan(5)).
autocmd BufNewFile,BufRead *.rplan setfiletype rplan
