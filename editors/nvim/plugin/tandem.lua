-- Loaded by Neovim from the runtimepath; the real work is in lua/tandem.
if vim.g.loaded_tandem then
  return
end
vim.g.loaded_tandem = true
