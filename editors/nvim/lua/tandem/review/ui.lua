-- The inline review's drawing: removed lines highlighted (`DiffDelete`),
-- proposed lines as virtual lines (`DiffAdd`), a sign on each hunk and a
-- hint line, all extmarks in one namespace cleared before each redraw.
local config = require('tandem.config')
local hunks = require('tandem.review.hunks')

local M = {}

M.ns = vim.api.nvim_create_namespace('tandem_review')
--- Where each hunk is now: one extmark per hunk, moved by the user's edits.
M.track = vim.api.nvim_create_namespace('tandem_review_track')

--- The row the hunk's first line is on now.
function M.row(buf, hunk)
  local pos = vim.api.nvim_buf_get_extmark_by_id(buf, M.track, hunk.mark, {})
  return pos[1] or hunk.anchor
end

--- The hunk's edit at the buffer's rows now.
function M.current_edit(buf, hunk)
  return hunks.shifted(hunk.edit, M.row(buf, hunk) - hunk.anchor)
end

--- How each hunk of `f` shows on its buffer now.
function M.previews(f)
  local lines = vim.api.nvim_buf_get_lines(f.buf, 0, -1, false)
  local out = {}
  for i, hunk in ipairs(f.hunks) do
    if f.kind == 'delete' then
      out[i] = { first = 0, last = #lines - 1, new = {} }
    elseif f.kind == 'create' then
      out[i] = { first = 0, last = -1, new = hunks.created(f.edits) }
    elseif hunk.edit == nil then
      -- A move without changes: only its hint, above the first line.
      out[i] = { first = 0, last = -1, new = {} }
    else
      out[i] = hunks.preview(lines, M.current_edit(f.buf, hunk))
    end
  end
  return out
end

local function hint(f, i, decision)
  local what = ({ create = 'new file', delete = 'file deleted', move = 'moved to ' .. (f.new_path or '?') })[f.kind]
  local label = string.format('tandem %s%d/%d', what and (what .. ' · ') or '', i, #f.hunks)
  if decision == 'accept' then
    return label .. ': accepted (applied when every hunk is decided)'
  elseif decision == 'reject' then
    return label .. ': rejected'
  end
  local keys = {}
  for _, k in ipairs({ { 'review_accept', 'accept' }, { 'review_reject', 'reject' }, { 'review_next', 'next' } }) do
    local lhs = config.keymap(k[1])
    if lhs then
      table.insert(keys, lhs .. ' ' .. k[2])
    end
  end
  table.insert(keys, ':TandemReviewDiff')
  return label .. ': ' .. table.concat(keys, ' · ')
end

--- Redraws every hunk of file `f` in its buffer.
function M.render(f)
  local buf = f.buf
  if not vim.api.nvim_buf_is_valid(buf) then
    return
  end
  vim.api.nvim_buf_clear_namespace(buf, M.ns, 0, -1)
  local count = vim.api.nvim_buf_line_count(buf)
  for i, p in ipairs(M.previews(f)) do
    local decision = f.hunks[i].decision
    local virt = {}
    if decision == nil then
      if p.last >= p.first then
        vim.api.nvim_buf_set_extmark(buf, M.ns, p.first, 0, {
          end_row = p.last + 1,
          end_col = 0,
          hl_group = 'DiffDelete',
          hl_eol = true,
          strict = false,
        })
      end
      for _, line in ipairs(p.new) do
        table.insert(virt, { { line, 'DiffAdd' } })
      end
    end
    table.insert(virt, { { hint(f, i, decision), decision and 'Comment' or 'DiagnosticHint' } })
    local row, above = p.last, false
    if p.last < p.first then
      row, above = p.first, true
    end
    if row >= count then
      row, above = count - 1, false
    end
    vim.api.nvim_buf_set_extmark(buf, M.ns, math.max(row, 0), 0, {
      virt_lines = virt,
      virt_lines_above = above,
      strict = false,
    })
    vim.api.nvim_buf_set_extmark(buf, M.ns, math.min(math.max(p.first, 0), count - 1), 0, {
      sign_text = decision == 'accept' and '+' or decision == 'reject' and 'x' or '~',
      sign_hl_group = decision and 'Comment' or 'DiffChange',
      strict = false,
    })
  end
end

--- Removes the review's marks from `buf`.
function M.clear(buf)
  if vim.api.nvim_buf_is_valid(buf) then
    vim.api.nvim_buf_clear_namespace(buf, M.ns, 0, -1)
    vim.api.nvim_buf_clear_namespace(buf, M.track, 0, -1)
  end
end

return M
