-- Renders `tandem/update` notifications into the chat buffer and keeps
-- the status the statusline shows (mode, running or idle, tokens).
local chat = require('tandem.chat')

local M = {}

--- Sessions whose history is being replayed (`tandem/loadSession`).
M.replaying = {}

--- Each session's user messages, in order: `{id, text}` (for `:TandemRewind`).
M.messages = {}

--- What the statusline shows.
M.status = { mode = nil, running = false, tokens = 0 }

--- @type table<string, {title: string, kind: string, status: string, diff: string[]?}>
local tools = {}

local STATUS = {
  pending = 'pending',
  in_progress = 'running',
  completed = 'done',
  failed = 'failed',
}

local function tool_lines(id)
  local tool = tools[id]
  local lines = { string.format('- `%s` %s · %s', tool.kind, tool.title, tool.status) }
  if tool.diff then
    vim.list_extend(lines, tool.diff)
  end
  return lines
end

local text_diff = (vim.text and vim.text.diff) or vim.diff

-- A diff content item as fenced unified-diff-ish lines.
local function diff_lines(item)
  local out = { '  ```diff', '  --- ' .. (item.oldText and item.path or '/dev/null'), '  +++ ' .. item.path }
  local old = item.oldText and vim.split(item.oldText, '\n', { plain = true }) or {}
  local new = vim.split(item.newText or '', '\n', { plain = true })
  if old[#old] == '' then
    table.remove(old)
  end
  if new[#new] == '' then
    table.remove(new)
  end
  local function text(lines)
    return #lines == 0 and '' or (table.concat(lines, '\n') .. '\n')
  end
  local indices = text_diff(text(old), text(new), { result_type = 'indices' })
  for _, hunk in ipairs(indices or {}) do
    local a, na, b, nb = hunk[1], hunk[2], hunk[3], hunk[4]
    table.insert(out, string.format('  @@ -%d,%d +%d,%d @@', a, na, b, nb))
    for i = a, a + na - 1 do
      table.insert(out, '  -' .. old[i])
    end
    for i = b, b + nb - 1 do
      table.insert(out, '  +' .. new[i])
    end
  end
  table.insert(out, '  ```')
  return out
end

local function first_text(content)
  for _, block in ipairs(content or {}) do
    if block.type == 'text' then
      return block.text
    end
  end
  return ''
end

local function resource_names(content)
  local names = {}
  for _, block in ipairs(content or {}) do
    local uri = block.uri or (block.resource and block.resource.uri)
    if block.type == 'image' then
      table.insert(names, 'an image (' .. (block.mimeType or 'image'):gsub('^image/', '') .. ')')
    elseif uri then
      local path = vim.fn.fnamemodify(vim.uri_to_fname((uri:gsub('#.*$', ''))), ':~:.')
      local lines = uri:match('#(.*)$')
      table.insert(names, lines and (path .. '#' .. lines) or path)
    end
  end
  return names
end

local function plan_lines(entries)
  local marks = { pending = '[ ]', in_progress = '[~]', completed = '[x]' }
  local lines = { '**Plan**' }
  for _, entry in ipairs(entries or {}) do
    table.insert(lines, string.format('- %s %s', marks[entry.status] or '[ ]', entry.content))
  end
  return lines
end

-- Ids are the model's (tool calls) or per session (messages, turns):
-- blocks are keyed by session and turn so two never share a key.
local function key(kind, params, id)
  return table.concat({ kind, params.sessionId or '', params.turnId or '', id or '' }, '/')
end

local renderers = {}

-- messageId -> the chat block of that user message (a `rewound` update
-- names messages, not turns).
local user_blocks = {}
local rewound_ns = vim.api.nvim_create_namespace('tandem_rewound')
-- messageId -> the extmark that marks it rewound.
local rewound_marks = {}

function renderers.user_message(update, params)
  chat.end_step()
  local text = first_text(update.content)
  local heading = vim.split(text, '\n', { plain = true })
  local lines = { '## ' .. (heading[1] or '') }
  for i = 2, #heading do
    table.insert(lines, heading[i])
  end
  local names = resource_names(update.content)
  if #names > 0 then
    table.insert(lines, '_with ' .. table.concat(names, ', ') .. '_')
  end
  table.insert(lines, '')
  local block = key('user', params, update.messageId or tostring(vim.uv.hrtime()))
  chat.block(block, lines)
  if update.messageId then
    user_blocks[update.messageId] = block
  end
  if update.messageId and params.sessionId then
    local list = M.messages[params.sessionId] or {}
    M.messages[params.sessionId] = list
    if
      not vim.tbl_contains(
        vim.tbl_map(function(m)
          return m.id
        end, list),
        update.messageId
      )
    then
      table.insert(list, { id = update.messageId, text = heading[1] or '' })
    end
  end
end

-- Whether the text streaming now is the model's reasoning (shown quoted).
local thinking = false

local function end_thought()
  if thinking then
    thinking = false
    chat.start_line('')
  end
end

function renderers.agent_thought_chunk(update)
  chat.mark_step_start()
  if not thinking then
    thinking = true
    chat.start_line('> ')
  end
  chat.append((string.gsub(update.content and update.content.text or '', '\n', '\n> ')))
end

function renderers.agent_message_chunk(update)
  end_thought()
  chat.mark_step_start()
  chat.append(update.content and update.content.text or '')
end

function renderers.agent_message_reset()
  chat.reset_step()
end

function renderers.tool_call(update, params)
  chat.end_step()
  local id = key('tool', params, update.toolCallId)
  tools[id] = {
    title = update.title or update.toolCallId,
    kind = update.kind or 'other',
    status = STATUS[update.status] or update.status or 'pending',
  }
  chat.block(id, tool_lines(id))
end

function renderers.tool_call_update(update, params)
  local id = key('tool', params, update.toolCallId)
  local tool = tools[id]
  if not tool then
    return
  end
  local fold = 0
  if update.waitingFor then
    tool.status = 'waiting for you (' .. update.waitingFor .. ')'
  elseif update.status then
    tool.status = STATUS[update.status] or update.status
  elseif update.outputDelta then
    return
  end
  for _, item in ipairs(update.content or {}) do
    if item.type == 'diff' then
      tool.diff = tool.diff or {}
      local lines = diff_lines(item)
      vim.list_extend(tool.diff, lines)
      fold = fold + #lines
    end
  end
  chat.block(id, tool_lines(id), fold)
end

function renderers.plan(update, params)
  chat.end_step()
  chat.block(key('plan', params), plan_lines(update.entries))
end

function renderers.current_mode_update(update)
  M.status.mode = update.currentModeId
end

function renderers.usage(update)
  local session = update.session or update.turn or {}
  M.status.tokens = (session.inputTokens or 0) + (session.outputTokens or 0)
  require('tandem.models').on_usage(update)
end

function renderers.current_model_update(update)
  require('tandem.models').on_model_update(update)
end

function renderers.input_status(update)
  if update.status == 'claimed' then
    M.status.running = true
  end
end

function renderers.context_compacted(update)
  chat.write(string.format('\n_[%d earlier messages compacted]_\n', update.removedMessages or 0))
end

-- A conversation rewind: the dropped user messages' headings are marked
-- "(rewound)" and greyed (namespace `tandem_rewound`), and their entries in
-- `M.messages` get `rewound = true`; a note says what happened. A redo
-- (`restoredMessageIds`) takes the marks off the messages it brings back.
function renderers.rewound(update, params)
  if not update.conversation then
    return
  end
  chat.end_step()
  local dropped = update.droppedMessageIds or {}
  local restored = update.restoredMessageIds or {}
  local buf = chat.buf()
  for _, id in ipairs(restored) do
    if rewound_marks[id] then
      pcall(vim.api.nvim_buf_del_extmark, buf, rewound_ns, rewound_marks[id])
      rewound_marks[id] = nil
    end
    for _, m in ipairs(M.messages[params.sessionId] or {}) do
      if m.id == id then
        m.rewound = nil
      end
    end
  end
  if #restored > 0 then
    chat.write(string.format('\n_[%s redone: %d message(s) back in the context]_\n', update.toMessageId, #restored))
  end
  for _, id in ipairs(dropped) do
    local row = user_blocks[id] and chat.block_row(user_blocks[id])
    if row then
      local line = vim.api.nvim_buf_get_lines(buf, row, row + 1, false)[1] or ''
      rewound_marks[id] = vim.api.nvim_buf_set_extmark(buf, rewound_ns, row, 0, {
        end_col = #line,
        hl_group = 'Comment',
        virt_text = { { ' (rewound)', 'Comment' } },
        virt_text_pos = 'eol',
      })
    end
    for _, m in ipairs(M.messages[params.sessionId] or {}) do
      if m.id == id then
        m.rewound = true
      end
    end
  end
  if #dropped > 0 then
    chat.write(
      string.format("\n_[rewound (%s): %d message(s) out of the model's context]_\n", update.rewindId or '', #dropped)
    )
  end
end

function renderers.turn_end(update, params)
  chat.end_step()
  M.status.running = false
  local text = '[' .. update.stopReason .. (update.message and (': ' .. update.message) or '') .. ']'
  chat.block(key('end', params), { '', text, '' })
  chat.flush()
  vim.api.nvim_exec_autocmds('User', {
    pattern = 'TandemTurnEnd',
    modeline = false,
    data = {
      sessionId = params.sessionId,
      turnId = params.turnId,
      stopReason = update.stopReason,
      message = update.message,
      usage = update.usage,
      replayed = M.replaying[params.sessionId] or nil,
    },
  })
end

--- The `tandem/update` handler.
function M.handle(params)
  local update = params and params.update or {}
  if thinking and update.sessionUpdate ~= 'agent_thought_chunk' and update.sessionUpdate ~= 'agent_message_chunk' then
    thinking = false
  end
  require('tandem.trail').note(params)
  local render = renderers[update.sessionUpdate]
  if render then
    render(update, params)
  end
  if update.sessionUpdate == 'tool_call_update' and (update.status == 'completed' or update.status == 'failed') then
    -- A review still open for a call that ended was withdrawn.
    require('tandem.review').withdraw('tandem-patch-' .. update.toolCallId)
  end
end

return M
