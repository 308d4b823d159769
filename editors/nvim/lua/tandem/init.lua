-- tandem for Neovim: starts `tandem lsp` as a language server, streams the
-- agent's answer into a scratch buffer (`tandem://chat`) and answers the
-- daemon's permission requests.
--
--   require('tandem').setup({ cmd = { 'tandem', 'lsp' } })
--   :TandemPrompt explain this file
--   :TandemCancel
--
-- Open buffers reach the daemon through the usual LSP document sync, so
-- the agent reads what you see, unsaved edits included.

local M = {}

M.config = {
  cmd = { 'tandem', 'lsp' },
  -- Sent as `initializationOptions` (same keys as config.toml).
  init_options = nil,
  -- The `config` of `tandem/newSession` (per-session overrides).
  session_config = nil,
  -- function(params) -> optionId; nil asks with vim.fn.confirm.
  on_permission = nil,
}

local state = { client_id = nil, session = nil, buf = nil }

--- The chat buffer, created on first use.
function M.output_buf()
  if state.buf and vim.api.nvim_buf_is_valid(state.buf) then
    return state.buf
  end
  state.buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_name(state.buf, 'tandem://chat')
  vim.bo[state.buf].filetype = 'markdown'
  return state.buf
end

--- Appends text at the end of the chat buffer, continuing its last line.
local function append(text)
  local buf = M.output_buf()
  local lines = vim.split(text, '\n', { plain = true })
  local last = vim.api.nvim_buf_line_count(buf)
  local current = vim.api.nvim_buf_get_lines(buf, last - 1, last, false)[1] or ''
  lines[1] = current .. lines[1]
  vim.api.nvim_buf_set_lines(buf, last - 1, last, false, lines)
end

local function ask_permission(params)
  local options = params.options or {}
  local labels = {}
  for i, option in ipairs(options) do
    labels[i] = '&' .. i .. ' ' .. option.name
  end
  local title = params.toolCall and params.toolCall.title or 'tandem'
  local picked = vim.fn.confirm('tandem wants to: ' .. title, table.concat(labels, '\n'), #labels)
  local option = options[picked] or options[#options]
  return option and option.optionId or 'reject_once'
end

local handlers = {
  ['tandem/update'] = function(_, params)
    local update = params.update or {}
    local kind = update.sessionUpdate
    if kind == 'agent_message_chunk' then
      append(update.content.text or '')
    elseif kind == 'agent_message_reset' then
      append('\n[the answer restarts]\n')
    elseif kind == 'tool_call' then
      append('\n> ' .. (update.title or update.toolCallId) .. '\n')
    elseif kind == 'tool_call_update' and update.waitingFor then
      append('\n[waiting for you: ' .. update.waitingFor .. ']\n')
    elseif kind == 'turn_end' then
      append('\n[' .. update.stopReason .. (update.message and (': ' .. update.message) or '') .. ']\n')
    end
  end,
  ['tandem/requestPermission'] = function(_, params)
    local choose = M.config.on_permission or ask_permission
    return { outcome = { outcome = 'selected', optionId = choose(params) } }
  end,
}

function M.setup(opts)
  M.config = vim.tbl_deep_extend('force', M.config, opts or {})
  vim.api.nvim_create_user_command('TandemPrompt', function(o)
    M.prompt(o.args)
    vim.cmd('botright split')
    vim.api.nvim_win_set_buf(0, M.output_buf())
  end, { nargs = '+', desc = 'Ask tandem' })
  vim.api.nvim_create_user_command('TandemCancel', function()
    M.cancel()
  end, { desc = 'Cancel the running tandem turn' })
end

--- Starts (or reuses) the daemon for the current buffer's project.
function M.start()
  if state.client_id and vim.lsp.get_client_by_id(state.client_id) then
    vim.lsp.buf_attach_client(0, state.client_id)
    return state.client_id
  end
  local capabilities = vim.tbl_deep_extend('force', vim.lsp.protocol.make_client_capabilities(), {
    experimental = { tandem = { requestPermission = true, requestUserInput = false } },
  })
  state.client_id = vim.lsp.start({
    name = 'tandem',
    cmd = M.config.cmd,
    root_dir = vim.fn.getcwd(),
    capabilities = capabilities,
    handlers = handlers,
    init_options = M.config.init_options,
    -- The agent must see every keystroke before a prompt goes out.
    flags = { debounce_text_changes = 0 },
  })
  return state.client_id
end

--- Whether the daemon has answered `initialize`.
function M.ready()
  local client = state.client_id and vim.lsp.get_client_by_id(state.client_id)
  return client ~= nil and client.initialized == true
end

local function client()
  local id = state.client_id or M.start()
  return vim.lsp.get_client_by_id(id)
end

--- Sends a prompt; `on_done(err, receipt)` gets the turn's receipt.
function M.prompt(text, on_done)
  local c = client()
  local function send()
    append('\n## ' .. text .. '\n\n')
    c:request('tandem/prompt', { sessionId = state.session, prompt = { { type = 'text', text = text } } },
      function(err, result)
        if on_done then
          on_done(err, result)
        elseif err then
          vim.notify('tandem: ' .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
        end
      end)
  end
  if state.session then
    send()
    return
  end
  c:request('tandem/newSession', { config = M.config.session_config }, function(err, result)
    if err then
      if on_done then
        on_done(err, nil)
      else
        vim.notify('tandem: ' .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
      end
      return
    end
    state.session = result.sessionId
    send()
  end)
end

function M.cancel()
  local c = state.client_id and vim.lsp.get_client_by_id(state.client_id)
  if c and state.session then
    c:notify('tandem/cancel', { sessionId = state.session })
  end
end

return M
