-- The Lua half of the Neovim test harness (tests/e2e/nvim/harness.rs):
-- loaded into a headless Neovim before a test's body. `TEST` holds what
-- the Rust side passes in (plugin path, binary, session config, output
-- file); `T` is what a test body uses.
local T = { results = {}, turns = {}, events = {} }
_G.T = T

-- Neovim's python3 provider probes the interpreter when a Python file
-- opens (seconds here); the plugin uses no provider.
for _, provider in ipairs({ 'python3', 'node', 'ruby', 'perl' }) do
  vim.g['loaded_' .. provider .. '_provider'] = 0
end
vim.opt.rtp:prepend(TEST.plugin)
vim.o.swapfile = false
vim.o.shortmess = vim.o.shortmess .. 'F'

--- Waits (processing events) until `cond()` is true, at most `ms`.
function T.wait(cond, what, ms)
  if not vim.wait(ms or 20000, cond, 5) then
    error('timed out waiting for ' .. what, 2)
  end
end

function T.put(key, value)
  T.results[key] = value
end

function T.lines(buf)
  return vim.api.nvim_buf_get_lines(buf or 0, 0, -1, false)
end

function T.path(relative)
  return TEST.root .. '/' .. relative
end

-- The plugin's own events: turn ends (with the receipt), and everything
-- else a test may wait on.
vim.api.nvim_create_autocmd('User', {
  pattern = 'Tandem*',
  callback = function(args)
    table.insert(T.events, { name = args.match, data = args.data })
    -- Turn ends replayed by a session load are history, not turns ending.
    if args.match == 'TandemTurnEnd' and not (args.data or {}).replayed then
      table.insert(T.turns, args.data)
    end
  end,
})

--- Waits for the n-th turn end and returns its receipt.
function T.turn(n)
  T.wait(function()
    return #T.turns >= n
  end, 'turn end #' .. n)
  return T.turns[n]
end

--- Waits for an event `name` (a `User` pattern) seen after `after` events.
function T.event(name, after)
  local found
  T.wait(function()
    for i = (after or 0) + 1, #T.events do
      if T.events[i].name == name then
        found = T.events[i]
        return true
      end
    end
    return false
  end, 'event ' .. name)
  return found
end

--- `setup()` with the test's binary and session config; `extra` on top.
function T.setup(extra)
  local opts = vim.tbl_deep_extend('force', {
    cmd = { TEST.bin, 'lsp' },
    session_config = vim.json.decode(TEST.config),
  }, extra or {})
  require('tandem').setup(opts)
end

function T.chat_lines()
  local buf = vim.fn.bufnr('tandem://chat')
  return buf > 0 and T.lines(buf) or {}
end

function T.chat_text()
  return table.concat(T.chat_lines(), '\n')
end

function T.finish()
  local ok, encoded = pcall(vim.json.encode, T.results)
  if not ok then
    encoded = vim.json.encode({ error = 'results are not JSON: ' .. encoded })
  end
  vim.fn.writefile({ encoded }, TEST.out)
  vim.cmd('qa!')
end
