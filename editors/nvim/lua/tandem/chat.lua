-- The chat buffer `tandem://chat`: one buffer, shown in at most one window
-- per tab page, following its end while text streams. Streamed text is
-- coalesced and drawn by a timer, appended at the end (never rewriting
-- the buffer); tool calls and the plan are blocks updated in place,
-- tracked by extmarks.
local config = require('tandem.config')

local M = {}

local NAME = 'tandem://chat'
local ns = vim.api.nvim_create_namespace('tandem_chat')

local state = {
  buf = nil, --- @type integer?
  pending = {}, --- @type string[]
  timer = nil, --- @type uv.uv_timer_t?
  blocks = {}, --- @type table<string, {mark: integer, count: integer}>
  step_mark = nil, --- @type integer? where this step's streamed text began
  input_buf = nil, --- @type integer?
}

--- The chat buffer, created on first use.
function M.buf()
  if state.buf and vim.api.nvim_buf_is_valid(state.buf) then
    return state.buf
  end
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_name(buf, NAME)
  vim.bo[buf].filetype = 'markdown'
  vim.bo[buf].bufhidden = 'hide'
  vim.bo[buf].undolevels = -1
  state.buf, state.blocks, state.pending, state.step_mark = buf, {}, {}, nil
  return buf
end

--- The window showing the chat in the current tab page, if any.
function M.win()
  local buf = state.buf
  if not buf or not vim.api.nvim_buf_is_valid(buf) then
    return nil
  end
  for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    if vim.api.nvim_win_get_buf(win) == buf then
      return win
    end
  end
end

local function scroll_to_end(win)
  local buf = M.buf()
  local last = vim.api.nvim_buf_line_count(buf)
  vim.api.nvim_win_set_cursor(win, { last, 0 })
end

--- Shows the chat (one window, reused) without moving the cursor there
--- unless `focus`; returns its window.
function M.show(focus)
  local win = M.win()
  if not win then
    local from = vim.api.nvim_get_current_win()
    vim.cmd(config.current.chat.split)
    win = vim.api.nvim_get_current_win()
    vim.api.nvim_win_set_buf(win, M.buf())
    if config.current.chat.split:find('vsplit') then
      vim.api.nvim_win_set_width(win, config.current.chat.width)
    end
    vim.wo[win].wrap = true
    vim.wo[win].linebreak = true
    vim.wo[win].foldmethod = 'manual'
    vim.wo[win].number = false
    -- The model, the context in use and the cost (tandem.models).
    vim.wo[win].winbar = "%{v:lua.require'tandem.models'.winbar()}"
    scroll_to_end(win)
    if not focus then
      vim.api.nvim_set_current_win(from)
    end
  elseif focus then
    vim.api.nvim_set_current_win(win)
  end
  return win
end

--- Closes the chat window if shown, else shows and focuses it.
function M.toggle()
  local win = M.win()
  if win and #vim.api.nvim_tabpage_list_wins(0) > 1 then
    if state.input_buf and vim.api.nvim_buf_is_valid(state.input_buf) then
      for _, input in ipairs(vim.fn.win_findbuf(state.input_buf)) do
        pcall(vim.api.nvim_win_close, input, false)
      end
    end
    vim.api.nvim_win_close(win, false)
  else
    M.show(true)
    M.open_input()
  end
end

-- Windows that follow the end: all but the current one, which follows
-- only while its cursor is on the last line.
local function followers()
  local buf = M.buf()
  local last = vim.api.nvim_buf_line_count(buf)
  local current = vim.api.nvim_get_current_win()
  local out = {}
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    if win ~= current or vim.api.nvim_win_get_cursor(win)[1] >= last then
      table.insert(out, win)
    end
  end
  return out
end

local function follow(wins)
  for _, win in ipairs(wins) do
    if vim.api.nvim_win_is_valid(win) then
      scroll_to_end(win)
    end
  end
end

-- Inserts `text` at the very end of the buffer.
local function write_at_end(buf, text)
  local last = vim.api.nvim_buf_line_count(buf) - 1
  local line = vim.api.nvim_buf_get_lines(buf, last, last + 1, false)[1] or ''
  vim.api.nvim_buf_set_text(buf, last, #line, last, #line, vim.split(text, '\n', { plain = true }))
end

--- Draws the streamed text that is waiting.
function M.flush()
  if state.timer then
    state.timer:stop()
  end
  if #state.pending == 0 then
    return
  end
  local text = table.concat(state.pending)
  state.pending = {}
  local buf = M.buf()
  local wins = followers()
  write_at_end(buf, text)
  follow(wins)
end

--- Appends streamed text; it is drawn within `chat.flush_ms`.
function M.append(text)
  if text == nil or text == '' then
    return
  end
  table.insert(state.pending, text)
  if not state.timer then
    state.timer = assert(vim.uv.new_timer())
  end
  if not state.timer:is_active() then
    state.timer:start(config.current.chat.flush_ms, 0, vim.schedule_wrap(M.flush))
  end
end

--- Appends text at once (flushing what streamed before it).
function M.write(text)
  M.flush()
  local buf = M.buf()
  local wins = followers()
  write_at_end(buf, text)
  follow(wins)
end

-- Starts a fresh line at the end unless the last one is empty.
local function ensure_line_start(buf)
  local last = vim.api.nvim_buf_line_count(buf)
  local line = vim.api.nvim_buf_get_lines(buf, last - 1, last, false)[1]
  if line ~= '' then
    write_at_end(buf, '\n')
  end
end

--- Starts a new line at the end (unless the last one is empty) with `prefix`.
function M.start_line(prefix)
  M.flush()
  local buf = M.buf()
  local wins = followers()
  ensure_line_start(buf)
  if prefix and prefix ~= '' then
    write_at_end(buf, prefix)
  end
  follow(wins)
end

--- Shows `lines` as the block `key`: in place when it exists, else as
--- new lines at the end (the text that streams next goes below them).
--- `fold` lines at the end of the block are folded in the chat windows.
function M.block(key, lines, fold)
  M.flush()
  local buf = M.buf()
  local wins = followers()
  local block = state.blocks[key]
  local row
  if block then
    row = vim.api.nvim_buf_get_extmark_by_id(buf, ns, block.mark, {})[1]
  end
  if row and block.count == #lines then
    -- Only the lines that changed (a status), so folds inside survive.
    local old = vim.api.nvim_buf_get_lines(buf, row, row + #lines, false)
    for i, line in ipairs(lines) do
      if old[i] ~= line then
        vim.api.nvim_buf_set_lines(buf, row + i - 1, row + i, false, { line })
      end
    end
  elseif row then
    vim.api.nvim_buf_set_lines(buf, row, row + block.count, false, lines)
    block.count = #lines
  else
    ensure_line_start(buf)
    row = vim.api.nvim_buf_line_count(buf) - 1
    local out = vim.list_extend(vim.list_slice(lines), { '' })
    vim.api.nvim_buf_set_lines(buf, row, row + 1, false, out)
    local mark = vim.api.nvim_buf_set_extmark(buf, ns, row, 0, { right_gravity = false })
    state.blocks[key] = { mark = mark, count = #lines }
  end
  state.step_mark = nil
  if fold and fold > 0 then
    for _, win in ipairs(vim.fn.win_findbuf(buf)) do
      vim.api.nvim_win_call(win, function()
        vim.cmd(string.format('silent! %d,%dfold', row + #lines - fold + 1, row + #lines))
      end)
    end
  end
  follow(wins)
end

--- The 0-based row where block `key` starts, or nil.
function M.block_row(key)
  local block = state.blocks[key]
  if block then
    return vim.api.nvim_buf_get_extmark_by_id(M.buf(), ns, block.mark, {})[1]
  end
end

--- Whether block `key` is shown.
function M.has_block(key)
  return state.blocks[key] ~= nil
end

--- Marks where the current step's streamed text begins (for a reset).
function M.mark_step_start()
  if state.step_mark then
    return
  end
  M.flush()
  local buf = M.buf()
  local last = vim.api.nvim_buf_line_count(buf) - 1
  local line = vim.api.nvim_buf_get_lines(buf, last, last + 1, false)[1] or ''
  state.step_mark = vim.api.nvim_buf_set_extmark(buf, ns, last, #line, { right_gravity = false })
end

--- Drops the text the current step streamed (the provider call is retried).
function M.reset_step()
  M.flush()
  local buf = M.buf()
  if not state.step_mark then
    return
  end
  local pos = vim.api.nvim_buf_get_extmark_by_id(buf, ns, state.step_mark, {})
  local last = vim.api.nvim_buf_line_count(buf) - 1
  local line = vim.api.nvim_buf_get_lines(buf, last, last + 1, false)[1] or ''
  vim.api.nvim_buf_set_text(buf, pos[1], pos[2], last, #line, { '' })
end

--- Marks the end of this step's text (a tool call or the turn's end).
function M.end_step()
  state.step_mark = nil
end

--- Empties the chat (before a session is loaded into it).
function M.clear()
  M.flush()
  local buf = M.buf()
  vim.api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  vim.api.nvim_buf_clear_namespace(buf, vim.api.nvim_create_namespace('tandem_rewound'), 0, -1)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, {})
  state.blocks, state.step_mark = {}, nil
end

--- The prompt input under the chat window: `<CR>` in normal mode sends
--- its text with `on_send(text)`.
function M.open_input()
  local chat = M.win()
  if not chat then
    return
  end
  if not (state.input_buf and vim.api.nvim_buf_is_valid(state.input_buf)) then
    state.input_buf = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_name(state.input_buf, 'tandem://input')
    vim.bo[state.input_buf].filetype = 'markdown'
    local lhs = config.keymap('chat_send')
    if lhs then
      vim.keymap.set('n', lhs, function()
        local lines = vim.api.nvim_buf_get_lines(state.input_buf, 0, -1, false)
        local text = vim.trim(table.concat(lines, '\n'))
        if text ~= '' and M.on_send then
          vim.api.nvim_buf_set_lines(state.input_buf, 0, -1, false, {})
          M.on_send(text)
        end
      end, { buffer = state.input_buf, desc = 'tandem: send this prompt' })
    end
  end
  if #vim.fn.win_findbuf(state.input_buf) > 0 then
    return
  end
  vim.api.nvim_win_call(chat, function()
    vim.cmd('belowright 4split')
    vim.api.nvim_win_set_buf(0, state.input_buf)
  end)
end

--- Set by init: sends a prompt typed in the input buffer.
M.on_send = nil

return M
