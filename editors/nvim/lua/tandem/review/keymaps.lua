-- Buffer-local keymaps of a buffer under review, set while the review is
-- open and removed after. The defaults shadow no built-in (`<leader>ta`,
-- `<leader>tr`, `]h`, `[h`); `keymaps` in setup() changes or removes them.
local config = require('tandem.config')

local M = {}

local MAPS = {
  { 'review_accept', 'TandemReviewAccept', 'tandem: accept the hunk under the cursor' },
  { 'review_reject', 'TandemReviewReject', 'tandem: reject the hunk under the cursor' },
  { 'review_next', 'TandemReviewNext', 'tandem: next hunk under review' },
  { 'review_prev', 'TandemReviewPrev', 'tandem: previous hunk under review' },
}

--- Sets the review keymaps in `buf`.
function M.attach(buf)
  for _, map in ipairs(MAPS) do
    local lhs = config.keymap(map[1])
    if lhs then
      vim.keymap.set('n', lhs, '<Cmd>' .. map[2] .. '<CR>', { buffer = buf, desc = map[3] })
    end
  end
end

--- Removes them again.
function M.detach(buf)
  if not vim.api.nvim_buf_is_valid(buf) then
    return
  end
  for _, map in ipairs(MAPS) do
    local lhs = config.keymap(map[1])
    if lhs then
      pcall(vim.keymap.del, 'n', lhs, { buffer = buf })
    end
  end
end

return M
