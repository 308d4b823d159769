-- The chat's session: created on the first prompt, switched with
-- `:TandemSessions`; prompts, steering, mode and cancel go to it.
local chat = require('tandem.chat')
local client = require('tandem.client')
local config = require('tandem.config')

local M = {}

local state = { id = nil } --- @type {id: string?}

-- A new daemon does not have the old one's session open: the next prompt
-- opens a new one (:TandemSessions reopens the old).
table.insert(client.on_exit, function()
  state.id = nil
end)

function M.id()
  return state.id
end

local function report(err)
  vim.notify('tandem: ' .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
end

--- Calls `fn(sessionId)` with the chat's session, creating it if needed.
function M.ensure(fn)
  if state.id then
    return fn(state.id)
  end
  client.request('tandem/newSession', { config = config.current.session_config }, function(err, result)
    if err then
      return report(err)
    end
    if not state.id then
      state.id = result.sessionId
      -- The daemon's answer names the mode in force (its config.toml may set it).
      require('tandem.updates').status.mode = result.mode
      require('tandem.models').reset()
      require('tandem.models').remember(result)
    end
    fn(state.id)
  end)
end

--- The prompt blocks: the text, the images its `@path.png` words name,
--- and the selected lines as a resource. `range` is `{buf, line1, line2}`
--- (1-based, inclusive) or nil. Returns nil and an error when an image
--- cannot be read.
function M.blocks(text, range)
  local images, err = require('tandem.images').blocks(text)
  if not images then
    return nil, err
  end
  local blocks = { { type = 'text', text = text } }
  vim.list_extend(blocks, images)
  if range then
    local name = vim.api.nvim_buf_get_name(range.buf)
    local lines = vim.api.nvim_buf_get_lines(range.buf, range.line1 - 1, range.line2, false)
    local uri = vim.uri_from_fname(vim.fn.fnamemodify(name, ':p'))
    table.insert(blocks, {
      type = 'resource',
      resource = {
        uri = string.format('%s#L%d-%d', uri, range.line1, range.line2),
        text = table.concat(lines, '\n') .. '\n',
      },
    })
  end
  return blocks
end

--- Sends a prompt to the chat's session and shows the chat;
--- `on_done(err, receipt)` when the turn ends.
function M.prompt(text, range, on_done)
  local blocks, unreadable = M.blocks(text, range)
  if not blocks then
    vim.notify('tandem: ' .. unreadable, vim.log.levels.ERROR)
    return
  end
  chat.show(false)
  M.ensure(function(id)
    client.request('tandem/prompt', { sessionId = id, prompt = blocks }, function(err, result)
      if on_done then
        on_done(err, result)
      elseif err and err.code ~= -32800 then
        report(err)
      end
    end)
  end)
end

--- Steers the running turn (or opens one on an idle session).
function M.steer(text)
  local blocks, unreadable = M.blocks(text)
  if not blocks then
    vim.notify('tandem: ' .. unreadable, vim.log.levels.ERROR)
    return
  end
  M.ensure(function(id)
    client.request('tandem/steer', { sessionId = id, prompt = blocks }, function(err)
      if err then
        report(err)
      end
    end)
  end)
end

function M.cancel()
  if state.id then
    client.notify('tandem/cancel', { sessionId = state.id })
  end
end

M.MODES = { 'read-only', 'review', 'auto' }

function M.set_mode(mode)
  if not vim.tbl_contains(M.MODES, mode) then
    vim.notify('tandem: mode must be one of ' .. table.concat(M.MODES, ', '), vim.log.levels.ERROR)
    return
  end
  M.ensure(function(id)
    client.request('tandem/setMode', { sessionId = id, mode = mode }, function(err)
      if err then
        report(err)
      end
    end)
  end)
end

--- Lists the sessions with vim.ui.select and loads the chosen one into
--- the chat (its history replayed); `on_loaded(sessionId)` after.
function M.pick(on_loaded)
  client.request('tandem/listSessions', {}, function(err, result)
    if err then
      return report(err)
    end
    local sessions = result and result.sessions or {}
    if #sessions == 0 then
      vim.notify('tandem: no sessions yet', vim.log.levels.INFO)
      return
    end
    vim.ui.select(sessions, {
      prompt = 'tandem sessions',
      kind = 'tandem.session',
      format_item = function(s)
        return string.format(
          '%s  (%s, %d turn%s, %s)',
          s.title,
          s.state,
          s.turnCount,
          s.turnCount == 1 and '' or 's',
          s.updated
        )
      end,
    }, function(choice)
      if choice then
        M.load(choice.sessionId, on_loaded)
      end
    end)
  end)
end

--- Renames the chat's session (`tandem/renameSession`).
function M.rename(title)
  if not state.id then
    vim.notify('tandem: no session yet (send a prompt, or :TandemSessions)', vim.log.levels.WARN)
    return
  end
  client.request('tandem/renameSession', { sessionId = state.id, title = title }, function(err, result)
    if err then
      return report(err)
    end
    vim.notify('tandem: session renamed "' .. result.title .. '"', vim.log.levels.INFO)
  end)
end

--- Forks the chat's session before user message `message_id` (the whole
--- session when nil) and loads the fork into the chat; `on_loaded(id)`.
function M.fork(message_id, on_loaded)
  if not state.id then
    vim.notify('tandem: no session to fork', vim.log.levels.WARN)
    return
  end
  local params = { sessionId = state.id, messageId = message_id }
  client.request('tandem/forkSession', params, function(err, result)
    if err then
      return report(err)
    end
    M.load(result.sessionId, on_loaded)
  end)
end

--- Picks where to fork with vim.ui.select: the whole session, or before
--- one of its prompts.
function M.pick_fork(on_loaded)
  local items = { { text = '(the whole session)' } }
  for _, m in ipairs(require('tandem.trail').messages[state.id or ''] or {}) do
    table.insert(items, { id = m.id, text = 'before "' .. m.text .. '" (' .. m.id .. ')' })
  end
  vim.ui.select(items, {
    prompt = 'fork the tandem session',
    kind = 'tandem.fork',
    format_item = function(item)
      return item.text
    end,
  }, function(choice)
    if choice then
      M.fork(choice.id, on_loaded)
    end
  end)
end

function M.load(id, on_loaded)
  require('tandem.trail').forget(id)
  chat.clear()
  chat.show(false)
  require('tandem.models').reset()
  local updates = require('tandem.updates')
  updates.replaying[id] = true
  client.request('tandem/loadSession', { sessionId = id }, function(err, result)
    updates.replaying[id] = nil
    if err then
      return report(err)
    end
    state.id = id
    updates.status.mode = result.mode
    require('tandem.models').remember(result)
    chat.flush()
    vim.api.nvim_exec_autocmds('User', { pattern = 'TandemSessionLoaded', modeline = false, data = { sessionId = id } })
    if on_loaded then
      on_loaded(id)
    end
  end)
end

return M
