-- The inline review of the agent's edits. The plugin takes
-- `workspace/applyEdit` itself: an edit whose change annotation needs
-- confirmation opens every changed buffer with its hunks shown inline
-- (review/ui.lua); the user accepts or rejects each hunk (a created,
-- deleted or moved file as a whole); once every hunk is decided, exactly
-- the accepted hunks are applied to the buffers, one undo step per file,
-- and the request is answered (`applied: true` when anything was). The
-- daemon then reads the buffers and tells the model what landed. An edit
-- that needs no confirmation (auto mode) is applied at once.
local client = require('tandem.client')
local hunks = require('tandem.review.hunks')
local keymaps = require('tandem.review.keymaps')
local ui = require('tandem.review.ui')

local M = {}

--- Open proposals, oldest first.
--- @type {id: string, label: string, files: table[], co: thread}[]
local open = {}

local function emit(pattern, data)
  vim.api.nvim_exec_autocmds('User', { pattern = pattern, modeline = false, data = data })
end

-- The edit without its annotations, for Neovim's own apply (which would
-- ask again for annotated edits).
local function unannotated(edit)
  local copy = vim.deepcopy(edit)
  copy.changeAnnotations = nil
  for _, change in ipairs(copy.documentChanges or {}) do
    change.annotationId = nil
    for _, e in ipairs(change.edits or {}) do
      e.annotationId = nil
    end
  end
  return copy
end

local function apply_directly(edit)
  local ok, err = pcall(vim.lsp.util.apply_workspace_edit, unannotated(edit), client.encoding())
  if not ok then
    return { applied = false, failureReason = tostring(err) }
  end
  return { applied = true }
end

local function load(path)
  local existed = vim.fn.bufnr(path) ~= -1
  local buf = vim.fn.bufadd(path)
  vim.fn.bufload(buf)
  vim.bo[buf].buflisted = true
  return buf, not existed
end

local function track(buf, row)
  local count = vim.api.nvim_buf_line_count(buf)
  local anchor = math.max(0, math.min(row, count - 1))
  return anchor, vim.api.nvim_buf_set_extmark(buf, ui.track, anchor, 0, {})
end

local function prepare(f)
  f.path = vim.uri_to_fname(f.uri)
  f.new_path = f.new_uri and vim.uri_to_fname(f.new_uri)
  f.buf, f.created_buf = load(f.path)
  f.hunks = {}
  if f.kind == 'update' then
    for _, edit in ipairs(f.edits) do
      local anchor, mark = track(f.buf, edit.range.start.line)
      table.insert(f.hunks, { edit = edit, anchor = anchor, mark = mark })
    end
  else
    local row = f.kind == 'move' and f.edits[1] and f.edits[1].range.start.line or 0
    local anchor, mark = track(f.buf, row)
    if f.kind == 'move' then
      for _, edit in ipairs(f.edits) do
        local a, m = track(f.buf, edit.range.start.line)
        table.insert(f.hunks, { edit = edit, anchor = a, mark = m })
      end
    end
    if #f.hunks == 0 then
      table.insert(f.hunks, { edit = nil, anchor = anchor, mark = mark })
    end
  end
  keymaps.attach(f.buf)
  ui.render(f)
end

-- Shows the first file under review in a window that is not the chat.
local function reveal(proposal)
  local first = proposal.files[1]
  if not first then
    return
  end
  local win = vim.api.nvim_get_current_win()
  if vim.api.nvim_buf_get_name(vim.api.nvim_win_get_buf(win)):match('^tandem://') then
    for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
      if not vim.api.nvim_buf_get_name(vim.api.nvim_win_get_buf(w)):match('^tandem://') then
        win = w
        break
      end
    end
  end
  if vim.api.nvim_win_get_buf(win) ~= first.buf then
    vim.api.nvim_win_set_buf(win, first.buf)
  end
  local spans = ui.previews(first)
  local row = spans[1] and math.max(spans[1].first, 0) or 0
  pcall(vim.api.nvim_win_set_cursor, win, { row + 1, 0 })
end

--- The `workspace/applyEdit` handler. Runs in the coroutine Neovim gives
--- server requests; yields until the user has decided every hunk.
function M.handle(params)
  local edit = params and params.edit or {}
  if not hunks.needs_confirmation(edit) then
    return apply_directly(edit)
  end
  local co = coroutine.running()
  if not co or not coroutine.isyieldable() then
    return { applied = false, failureReason = 'the review could not be opened' }
  end
  local id = next(edit.changeAnnotations or {}) or tostring(vim.uv.hrtime())
  local proposal = { id = id, label = params.label or id, files = hunks.files(edit), co = co }
  local ok, err = pcall(function()
    for _, f in ipairs(proposal.files) do
      prepare(f)
    end
  end)
  if not ok then
    for _, f in ipairs(proposal.files) do
      if f.buf then
        ui.clear(f.buf)
        keymaps.detach(f.buf)
      end
    end
    return { applied = false, failureReason = 'the review could not be opened: ' .. tostring(err) }
  end
  table.insert(open, proposal)
  reveal(proposal)
  local count = 0
  for _, f in ipairs(proposal.files) do
    count = count + #f.hunks
  end
  vim.notify(
    string.format('tandem: review %s (%d change%s)', proposal.label, count, count == 1 and '' or 's'),
    vim.log.levels.INFO
  )
  emit('TandemReviewOpen', { id = id, label = proposal.label, hunks = count })
  return coroutine.yield()
end

local function undo_break(buf)
  vim.api.nvim_buf_call(buf, function()
    vim.cmd('let &g:undolevels = &g:undolevels')
  end)
end

local function silent_write(buf)
  vim.api.nvim_buf_call(buf, function()
    vim.cmd('silent keepalt write!')
  end)
end

local function apply_file(f)
  local accepted = {}
  for _, hunk in ipairs(f.hunks) do
    if hunk.decision == 'accept' and hunk.edit then
      table.insert(accepted, ui.current_edit(f.buf, hunk))
    end
  end
  local whole = f.hunks[1] and f.hunks[1].decision == 'accept'
  if f.kind == 'update' or (f.kind == 'move' and whole) then
    if #accepted > 0 then
      undo_break(f.buf)
      vim.lsp.util.apply_text_edits(accepted, f.buf, client.encoding())
    end
    if f.kind == 'move' then
      silent_write(f.buf)
      vim.lsp.util.rename(f.path, f.new_path)
    end
  elseif f.kind == 'create' then
    if whole then
      vim.fn.mkdir(vim.fn.fnamemodify(f.path, ':h'), 'p')
      vim.api.nvim_buf_set_lines(f.buf, 0, -1, false, hunks.created(f.edits))
      silent_write(f.buf)
    elseif f.created_buf then
      vim.api.nvim_buf_delete(f.buf, { force = true })
    end
  elseif f.kind == 'delete' and whole then
    vim.api.nvim_buf_delete(f.buf, { force = true })
    os.remove(f.path)
  end
end

local function close(proposal)
  for i, p in ipairs(open) do
    if p == proposal then
      table.remove(open, i)
      break
    end
  end
  for _, f in ipairs(proposal.files) do
    ui.clear(f.buf)
    keymaps.detach(f.buf)
  end
end

local function finish(proposal)
  local accepted, rejected = hunks.tally(proposal.files)
  local failures = {}
  -- Apply before closing: the hunks' positions are the tracking extmarks.
  for _, f in ipairs(proposal.files) do
    local ok, err = pcall(apply_file, f)
    if not ok then
      table.insert(failures, vim.fn.fnamemodify(f.path, ':~:.') .. ': ' .. tostring(err))
    end
  end
  close(proposal)
  local answer = { applied = accepted > 0 }
  if #failures > 0 then
    vim.notify('tandem: ' .. table.concat(failures, '\n'), vim.log.levels.ERROR)
  end
  if accepted == 0 then
    answer.failureReason = proposal.comment
  end
  emit('TandemReviewDone', { id = proposal.id, accepted = accepted, rejected = rejected })
  vim.schedule(function()
    coroutine.resume(proposal.co, answer)
  end)
end

-- The proposal and file whose buffer is `buf` (newest first).
local function files_in(buf)
  local out = {}
  for i = #open, 1, -1 do
    for _, f in ipairs(open[i].files) do
      if f.buf == buf then
        table.insert(out, { proposal = open[i], file = f })
      end
    end
  end
  return out
end

local function hunk_at_cursor()
  local buf = vim.api.nvim_get_current_buf()
  local row = vim.api.nvim_win_get_cursor(0)[1] - 1
  for _, entry in ipairs(files_in(buf)) do
    if entry.file.kind ~= 'update' then
      -- A created, deleted or moved file is decided whole, from anywhere in it.
      return entry.proposal, entry.file, 1
    end
    local spans = vim.tbl_map(function(p)
      return { p.first, p.last }
    end, ui.previews(entry.file))
    local i = hunks.at_row(spans, row)
    if i then
      return entry.proposal, entry.file, i
    end
  end
end

--- Decides the hunk under the cursor (`accept` or `reject`).
function M.decide(decision)
  local proposal, f, i = hunk_at_cursor()
  if not proposal then
    vim.notify('tandem: no hunk under review at the cursor', vim.log.levels.WARN)
    return
  end
  for j, hunk in ipairs(f.hunks) do
    if j == i or f.kind ~= 'update' then
      hunk.decision = decision
    end
  end
  ui.render(f)
  emit('TandemReviewDecided', { id = proposal.id, decision = decision })
  if hunks.all_decided(proposal.files) then
    finish(proposal)
  else
    M.jump(1, true)
  end
end

--- Decides every hunk of the proposal under the cursor (else the newest).
function M.decide_all(decision)
  local entry = files_in(vim.api.nvim_get_current_buf())[1]
  local proposal = entry and entry.proposal or open[#open]
  if not proposal then
    vim.notify('tandem: nothing to review', vim.log.levels.WARN)
    return
  end
  for _, f in ipairs(proposal.files) do
    for _, hunk in ipairs(f.hunks) do
      if hunk.decision == nil then
        hunk.decision = decision
      end
    end
  end
  finish(proposal)
end

--- Moves the cursor to the next (`dir` 1) or previous (-1) hunk under
--- review in this buffer; `undecided` skips decided ones.
function M.jump(dir, undecided)
  local buf = vim.api.nvim_get_current_buf()
  local row = vim.api.nvim_win_get_cursor(0)[1] - 1
  local rows = {}
  for _, entry in ipairs(files_in(buf)) do
    for i, p in ipairs(ui.previews(entry.file)) do
      if not undecided or entry.file.hunks[i].decision == nil then
        table.insert(rows, math.max(p.first, 0))
      end
    end
  end
  table.sort(rows)
  local target
  if dir > 0 then
    for _, r in ipairs(rows) do
      if r > row then
        target = r
        break
      end
    end
  else
    for i = #rows, 1, -1 do
      if rows[i] < row then
        target = rows[i]
        break
      end
    end
  end
  target = target or (undecided and rows[1])
  if target then
    vim.api.nvim_win_set_cursor(0, { math.min(target + 1, vim.api.nvim_buf_line_count(buf)), 0 })
  end
end

--- Side by side: this buffer and the text it would have with every hunk
--- not rejected, in diff mode.
function M.diff()
  local entry = files_in(vim.api.nvim_get_current_buf())[1]
  if not entry then
    vim.notify('tandem: this buffer has no changes under review', vim.log.levels.WARN)
    return
  end
  local f = entry.file
  local lines = vim.api.nvim_buf_get_lines(f.buf, 0, -1, false)
  local proposed
  if f.kind == 'delete' then
    proposed = {}
  elseif f.kind == 'create' then
    proposed = hunks.created(f.edits)
  else
    local edits = {}
    for _, hunk in ipairs(f.hunks) do
      if hunk.decision ~= 'reject' and hunk.edit then
        table.insert(edits, ui.current_edit(f.buf, hunk))
      end
    end
    proposed = hunks.apply(lines, edits)
  end
  local scratch = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(scratch, 0, -1, false, proposed)
  pcall(vim.api.nvim_buf_set_name, scratch, 'tandem://proposed/' .. vim.fn.fnamemodify(f.path, ':t'))
  vim.bo[scratch].filetype = vim.bo[f.buf].filetype
  vim.bo[scratch].modifiable = false
  vim.cmd('diffthis')
  vim.cmd('rightbelow vsplit')
  vim.api.nvim_win_set_buf(0, scratch)
  vim.cmd('diffthis')
end

--- Closes the review `id` if it is still open: the daemon withdrew it.
function M.withdraw(id)
  for _, proposal in ipairs(vim.list_slice(open)) do
    if proposal.id == id then
      close(proposal)
      for _, f in ipairs(proposal.files) do
        if f.kind == 'create' and f.created_buf and vim.api.nvim_buf_is_valid(f.buf) then
          vim.api.nvim_buf_delete(f.buf, { force = true })
        end
      end
      emit('TandemReviewDone', { id = id, withdrawn = true })
    end
  end
end

--- The open proposals (for tests and the statusline).
function M.pending()
  return #open
end

return M
