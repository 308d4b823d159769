-- tandem for Neovim: `setup()`, the commands, the keymaps, and the Lua API.
-- The parts: config (options), client (the daemon), session (prompts),
-- chat and updates (the chat buffer), ask (permissions, questions),
-- review (inline review of edits), tasks (keybinding tasks), language
-- (the user's language servers for the agent), health.
-- See :help tandem.
local ask = require('tandem.ask')
local chat = require('tandem.chat')
local client = require('tandem.client')
local config = require('tandem.config')
local language = require('tandem.language')
local review = require('tandem.review')
local session = require('tandem.session')
local tasks = require('tandem.tasks')
local updates = require('tandem.updates')

local M = {}

local state = { setup = false, problems = {}, unknown = {} }

local function guarded(name, fn)
  return function(err, params, ctx)
    local ok, result = pcall(fn, err, params, ctx)
    if not ok then
      vim.notify('tandem: ' .. name .. ' failed: ' .. tostring(result), vim.log.levels.ERROR)
      return nil
    end
    return result
  end
end

local handlers = {
  ['tandem/update'] = guarded('tandem/update', function(_, params)
    updates.handle(params)
  end),
  -- Requests: the return value is the answer. Not wrapped in pcall, so a
  -- handler may yield while the user decides (a Lua error still becomes
  -- an error answer).
  ['tandem/requestPermission'] = function(_, params)
    return ask.permission(params)
  end,
  ['tandem/requestUserInput'] = function(_, params)
    return ask.user_input(params)
  end,
  ['workspace/applyEdit'] = function(_, params)
    return review.handle(params)
  end,
}
for method, handler in pairs(language.handlers) do
  handlers[method] = handler
end

local function command(name, fn, opts)
  opts = opts or {}
  opts.desc = opts.desc or ('tandem: ' .. name)
  vim.api.nvim_create_user_command(name, fn, opts)
end

local function range_of(o)
  if o.range and o.range > 0 then
    return { buf = vim.api.nvim_get_current_buf(), line1 = o.line1, line2 = o.line2 }
  end
end

local function create_commands()
  command('TandemPrompt', function(o)
    session.prompt(o.args, range_of(o))
  end, { nargs = '+', range = true, desc = 'Ask tandem (with a range: about those lines)' })
  command('TandemCancel', function()
    session.cancel()
  end, { desc = 'Cancel the running tandem turn' })
  command('TandemSteer', function(o)
    session.steer(o.args)
  end, { nargs = '+', desc = 'Steer the running tandem turn' })
  command('TandemMode', function(o)
    session.set_mode(o.args)
  end, {
    nargs = 1,
    complete = function()
      return session.MODES
    end,
    desc = 'Set the approval mode: read-only, review or auto',
  })
  command('TandemModel', function(o)
    require('tandem.models').command(o.args)
  end, {
    nargs = '*',
    complete = function(arg, line)
      return require('tandem.models').complete(arg, line)
    end,
    desc = "Switch the session's model (and reasoning effort)",
  })
  command('TandemChat', function()
    chat.toggle()
  end, { desc = 'Open or close the tandem chat' })
  command('TandemSessions', function()
    session.pick()
  end, { desc = 'Pick a tandem session and load it into the chat' })
  command('TandemRename', function(o)
    session.rename(o.args)
  end, { nargs = '+', desc = "Rename the chat's tandem session" })
  command('TandemFork', function(o)
    if o.args == '' then
      session.pick_fork()
    else
      session.fork(o.args)
    end
  end, { nargs = '?', desc = 'Fork the session (before a message id, or pick) and load the fork' })
  command('TandemLocations', function()
    local n = require('tandem.trail').to_quickfix(session.id())
    vim.notify(string.format('tandem: %d location%s in the quickfix list', n, n == 1 and '' or 's'))
  end, { desc = "Put the last turn's tool locations in the quickfix list" })
  command('TandemRewind', function()
    require('tandem.rewind').pick()
  end, { desc = 'Rewind files and/or the conversation to before a message' })
  command('TandemMcp', function()
    require('tandem.mcp').show()
  end, { desc = "List the session's MCP servers and their tools" })
  command('TandemTask', function(o)
    local line1, line2 = o.line1, o.line2
    if o.args == '' then
      tasks.pick(0, line1, line2)
    else
      tasks.run(o.args, 0, line1, line2)
    end
  end, { nargs = '?', range = true, complete = tasks.complete, desc = 'Run a tandem task on the selection' })
  command('TandemReviewAccept', function()
    review.decide('accept')
  end, { desc = 'Accept the hunk under the cursor' })
  command('TandemReviewReject', function()
    review.decide('reject')
  end, { desc = 'Reject the hunk under the cursor' })
  command('TandemReviewAcceptAll', function()
    review.decide_all('accept')
  end, { desc = 'Accept every remaining hunk of the proposal' })
  command('TandemReviewRejectAll', function()
    review.decide_all('reject')
  end, { desc = 'Reject every remaining hunk of the proposal' })
  command('TandemReviewNext', function()
    review.jump(1)
  end, { desc = 'Go to the next hunk under review' })
  command('TandemReviewPrev', function()
    review.jump(-1)
  end, { desc = 'Go to the previous hunk under review' })
  command('TandemReviewDiff', function()
    review.diff()
  end, { desc = 'Show the proposal side by side (diff mode)' })
end

-- The visual selection's lines (1-based), leaving visual mode.
local function selection()
  local a, b = vim.fn.line('v'), vim.fn.line('.')
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes('<Esc>', true, false, true), 'nx', false)
  return math.min(a, b), math.max(a, b)
end

-- The visual keymaps the last setup() set, removed by the next one.
local visual_maps = {}

local function create_keymaps()
  for _, lhs in ipairs(visual_maps) do
    pcall(vim.keymap.del, 'x', lhs)
  end
  visual_maps = {}
  local maps = {
    task_edit = { tasks.edit, 'tandem: edit the selection (asks what to do)' },
    task_explain = {
      function(buf, l1, l2)
        tasks.run('explain', buf, l1, l2)
      end,
      'tandem: explain the selection',
    },
    task_fix = {
      function(buf, l1, l2)
        tasks.run('fix', buf, l1, l2)
      end,
      'tandem: fix the selection',
    },
  }
  for name, map in pairs(maps) do
    local lhs = config.keymap(name)
    if lhs then
      vim.keymap.set('x', lhs, function()
        local l1, l2 = selection()
        map[1](vim.api.nvim_get_current_buf(), l1, l2)
      end, { desc = map[2] })
      table.insert(visual_maps, lhs)
    end
  end
end

local function create_autocmds()
  local group = vim.api.nvim_create_augroup('tandem', { clear = true })
  vim.api.nvim_create_autocmd({ 'BufReadPost', 'BufNewFile', 'BufFilePost' }, {
    group = group,
    desc = 'tandem: attach workspace files to the daemon so it reads unsaved edits',
    callback = function(args)
      client.attach(args.buf)
    end,
  })
  language.record_versions()
  vim.api.nvim_create_autocmd('DiagnosticChanged', {
    group = group,
    desc = "tandem: tell the daemon the buffer's diagnostics, so it can check its edits",
    callback = function(args)
      language.report(args.buf)
    end,
  })
  vim.api.nvim_create_autocmd('User', {
    group = group,
    pattern = 'TandemReady',
    desc = 'tandem: tell the daemon the diagnostics the buffers already have',
    callback = function()
      language.report_all()
    end,
  })
  vim.api.nvim_create_autocmd('VimLeavePre', {
    group = group,
    desc = 'tandem: let the daemon flush its session logs',
    callback = function()
      client.stop(1000)
    end,
  })
end

--- Configures tandem (see :help tandem-setup). Safe to call again.
function M.setup(opts)
  local resolved, problems, unknown = config.resolve(opts)
  state.problems, state.unknown = problems, unknown
  if #unknown > 0 then
    vim.schedule(function()
      vim.notify('tandem: unknown setup() option(s) ignored: ' .. table.concat(unknown, ', '), vim.log.levels.WARN)
    end)
  end
  if not resolved then
    vim.notify(
      'tandem: invalid setup() options:\n- ' .. table.concat(problems, '\n- ') .. '\nSee :help tandem-options',
      vim.log.levels.ERROR
    )
    return false
  end
  config.current = resolved
  state.setup = true
  -- The mode until the daemon names it (newSession's and loadSession's
  -- answers, then current_mode_update).
  updates.status.mode = vim.tbl_get(resolved.session_config or {}, 'approval', 'mode')
    or vim.tbl_get(resolved.init_options or {}, 'approval', 'mode')
  client.set_handlers(handlers)
  chat.on_send = function(text)
    session.prompt(text)
  end
  create_commands()
  create_keymaps()
  create_autocmds()
  return true
end

--- For :checkhealth: whether setup() ran, its problems and unknown keys.
function M.is_setup()
  return state.setup
end

function M.setup_problems()
  return state.problems, state.unknown
end

--- Starts the daemon now (it also starts with the first prompt).
function M.start()
  return client.start()
end

--- Whether the daemon has answered `initialize`.
M.ready = client.ready

--- Sends a prompt; `on_done(err, receipt)` gets the turn's receipt.
function M.prompt(text, on_done)
  session.prompt(text, nil, on_done)
end

M.cancel = session.cancel
M.steer = session.steer
M.set_mode = session.set_mode

--- The chat buffer.
M.output_buf = chat.buf

--- A statusline component: the model (and effort), the context in use
--- of its window, and the session's cost when known ('' before a session).
function M.status()
  return require('tandem.models').status()
end

M.set_model = function(model, effort)
  require('tandem.models').set(model, effort)
end

--- A short statusline component: mode, running or idle, tokens.
function M.statusline()
  if not client.get() then
    return ''
  end
  local s = updates.status
  local parts = { 'tandem' }
  if s.mode then
    table.insert(parts, s.mode)
  end
  table.insert(parts, s.running and 'running' or 'idle')
  if review.pending() > 0 then
    table.insert(parts, 'review')
  end
  if s.tokens > 0 then
    table.insert(parts, s.tokens >= 1000 and string.format('%.1fk tok', s.tokens / 1000) or (s.tokens .. ' tok'))
  end
  return table.concat(parts, ' · ')
end

return M
